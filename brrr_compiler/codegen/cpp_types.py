"""C types of values (CTYPE) and of their storage in memory (STORAGE), for the C++ printers."""
import torch

CTYPE = {
    torch.float32: "float", torch.float64: "double", torch.float16: "float",
    torch.bfloat16: "float", torch.int8: "int8_t", torch.uint8: "uint8_t",
    torch.int16: "int16_t", torch.int32: "int32_t", torch.int64: "int64_t",
    torch.bool: "bool",
}
# bool lives in memory as uint8_t, read back as `!= 0`: gcc 12 vectorizes neither a load
# of C++ bool (a select on it becomes a branch) nor a bool-to-float conversion, while a byte
# compared with 0 is a vector compare whose mask feeds float selects directly. It also
# reads any nonzero byte as true (a uint8 tensor viewed as bool), as ATen does. float16
# and bfloat16 live as their bits in uint16_t, converted by the prelude's integer code
# (cpp_prelude_lowp.h): gcc 12 vectorizes no conversion of _Float16.
STORAGE = {**CTYPE, torch.float16: "uint16_t", torch.bfloat16: "uint16_t", torch.bool: "uint8_t"}

# A bool that vector loops read from outside them (a tile array of a column walk, a value a
# split row's OpenMP region reads from its shared block) is held in an int: gcc 12
# vectorizes no tile loop that reads a bool array beside float math ("no vectype": a
# per-row `where` condition kept generated pattern 5's three column walks scalar, 4.8x
# Inductor's time), and no select on a shared bool (a split row's chunk sums ran
# sequentially, fuzz seed 8091); on an int it selects with a broadcast mask.
HELD_BOOL = "int"


def held_ctype(dtype: torch.dtype, ctype: dict = CTYPE) -> str:
    """The C type of a value of `dtype` that vector loops read from outside them."""
    return HELD_BOOL if dtype is torch.bool else ctype[dtype]
