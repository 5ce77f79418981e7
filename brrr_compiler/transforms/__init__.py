"""Kernel IR to kernel IR: loop order and collapse (loops.py), non-positive exps marked
(signs.py), casts to float16/bfloat16 of values the type holds marked exact
(exact_casts.py), an innermost loop split where a select changes side (split.py), scratch rows
moved into output rows (scratch.py). Lowering and the schedule stage apply them."""
