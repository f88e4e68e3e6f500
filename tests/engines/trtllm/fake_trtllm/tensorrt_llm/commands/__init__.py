"""The stand-in's command-line tools (trtllm-serve, trtllm-bench), run through ../../bin."""
