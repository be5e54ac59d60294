// Placeholder source of a layer library that has no .cpp of its own yet.
