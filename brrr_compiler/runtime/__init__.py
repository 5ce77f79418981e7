"""Runtime: build generated C++ into cached shared libraries and load them (build.py,
toolchain.py). Kept import-free so that importing the package stays cheap."""
