"""Memory-model verification: events, axiomatic models (SC, PTX) and litmus tests."""
