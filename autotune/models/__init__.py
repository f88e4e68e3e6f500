"""Model folders: Hugging Face checkpoints, read without loading them (below the engines and the preflight)."""
