"""Developer tools that live beside the library and are never imported by it."""
