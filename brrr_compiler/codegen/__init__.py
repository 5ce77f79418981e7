"""Code generation: kernel IR -> source text (C++; Triton later)."""
