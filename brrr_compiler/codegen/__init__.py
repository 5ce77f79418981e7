"""Code generation: kernel IR -> source text: C++/OpenMP (cpp*.py) for CPU tensors, Triton
(triton*.py) for CUDA tensors and, under Triton's interpreter, for CPU ones."""
