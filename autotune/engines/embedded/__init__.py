"""The embedded engine: small byte-level PyTorch models shipped in the package, used to run real
speculative decoding (none / mtp / draft / ngram) on any machine without downloads."""
