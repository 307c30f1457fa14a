"""CPU tests that emulate what CUDA does differently (marker ``cuda_emulation``, run by CI).

No GPU has run this project's CUDA paths yet; these tests make the CPU behave as a GPU would
where the difference has broken, or would break, a run: CUDA's autocast rules
(`autocast_rules.cuda_autocast_rules`), device tensors that refuse silent host conversion,
checkpoints resumed onto another device, ``torch.compile``'s recompiles, and faked hardware.
"""

import pytest

from tests.cuda_emulation.autocast_rules import cuda_autocast_rules


def pytest_collection_modifyitems(config, items):
    here = str(config.rootpath / "tests" / "cuda_emulation")
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.cuda_emulation)


@pytest.fixture
def cuda_rules():
    """CPU autocast follows CUDA autocast's whole op table for the test (`cuda_autocast_rules`)."""
    with cuda_autocast_rules():
        yield


@pytest.fixture(autouse=True)
def _keys_as_on_a_gpu(monkeypatch):
    """The key network runs padded, as it does on CUDA (`lifelong.memory.keys.packs_keys`): the
    emulated device tensors sit on the CPU, where it would run packed."""
    monkeypatch.setattr("lifelong.memory.keys.packs_keys", lambda device: False)
