"""Model folders: what a Hugging Face checkpoint is, read without loading it.

:mod:`~autotune.models.folder` reads a folder (config.json, tokenizer files, safetensors headers),
:mod:`~autotune.models.kind` tells a draft's kind and a target's MTP modules,
:mod:`~autotune.models.layers` which layers are MoE and how wide, :mod:`~autotune.models.quantization`
the bytes per weight, :mod:`~autotune.models.footprint` its weights and KV cache per token, and
:mod:`~autotune.models.fit` whether that fits on a device. :mod:`~autotune.models.support` is what an
engine adapter says about folders (the architectures and drafters it runs). This package sits below the engines and the preflight: it imports
neither, so both (and the tuner) can share one reading of each folder.
"""
