"""Options and BRRR_* variables: every value type-checked, errors that name the option or
variable and what it accepts, strict booleans, "did you mean", modes, and the README's
table listing every option."""
import os
import re
from pathlib import Path

import pytest

from brrr_compiler.config import (_ENV, _OPTIONS, MODES, Config, build_config, valid_keys,
                                  with_mode)
from brrr_compiler.config_checks import OptionError

REPO = Path(__file__).resolve().parents[1]
BOOL_VARS = [var for var, key in _ENV.items() if isinstance(getattr(Config(), key), bool)
             or key == "cudagraphs"]


def _error(options=None, environ=None) -> str:
    with pytest.raises(OptionError) as info:
        build_config(options, environ or {})
    return str(info.value)


def test_every_config_field_is_an_option():
    assert sorted(_OPTIONS) == valid_keys()


@pytest.mark.parametrize("var", BOOL_VARS)
@pytest.mark.parametrize("text,value", [("1", True), ("true", True), ("YES", True),
                                        ("0", False), ("False", False), (" no ", False)])
def test_boolean_variables_parse_strictly(var, text, value):
    assert getattr(build_config(environ={var: text}), _ENV[var]) is value


@pytest.mark.parametrize("var", BOOL_VARS)
def test_boolean_variable_rejects_other_words(var):
    message = _error(environ={var: "maybe"})
    assert f"{var}='maybe'" in message and "1/true/yes or 0/false/no" in message


def test_cudagraphs_no_turns_them_off():
    assert build_config(environ={"BRRR_CUDAGRAPHS": "no"}).cudagraphs is False
    assert not build_config(environ={"BRRR_CUDAGRAPHS": "no"}).wants_cudagraphs()


@pytest.mark.parametrize("options,names", [
    ({"num_threads": "4"}, ["option num_threads='4'", "an integer >= 0", "not a str"]),
    ({"num_threads": -1}, ["option num_threads=-1", "integer >= 0"]),
    ({"num_threads": True}, ["option num_threads=True (a bool)"]),
    ({"max_kernel_args": 0}, ["option max_kernel_args=0", ">= 1"]),
    ({"strict": "yes"}, ["option strict='yes'", "True or False"]),
    ({"cudagraphs": 1}, ["option cudagraphs=1 (an int)", "True or False"]),
    ({"cache_dir": ""}, ["option cache_dir=''", "directory path"]),
    ({"cache_dir": 3}, ["option cache_dir=3 (an int)"]),
    ({"cache_max_bytes": "lots"}, ["option cache_max_bytes='lots'", "'4G'"]),
    ({"cache_max_bytes": -5}, ["option cache_max_bytes=-5"]),
    ({"passes": "cse"}, ["option passes='cse'", "('cse',)"]),
    ({"passes": [1]}, ["option passes=[1] (a list)"]),
    ({"device": 3}, ["option device=3 (an int)", "'h100'"]),
    ({"cxx": ""}, ["option cxx=''", "'g++'"]),
    ({"fusion": 7}, ["option fusion=7 (an int)", "'cost', 'greedy' or 'none'", "policy object"]),
    ({"fusion": "gredy"}, ["'cost', 'greedy' or 'none'", "did you mean 'greedy'?"]),
    ({"target": "cuda"}, ["option target='cuda'", "'auto', 'cpp' or 'triton'"]),
    ({"low_precision": "float"}, ["'eager' or 'float32'", "did you mean 'float32'?"]),
    ({"libm": "exact"}, ["option libm='exact'", "'fast' or 'accurate'"]),
    ({"autotune_margin": 0.5}, ["option autotune_margin=0.5 (a float)", "a number >= 1"]),
    ({"autotune_margin": "2"}, ["option autotune_margin='2'", "a number >= 1"]),
    ({"autotune_margin": float("inf")}, ["option autotune_margin=inf", "a number >= 1"]),
    ({"mode": "max_autotune"}, ["option mode='max_autotune'", "did you mean 'max-autotune'?"]
     + [repr(m) for m in MODES]),
])
def test_bad_option_values_name_the_option_and_what_it_accepts(options, names):
    message = _error(options)
    assert all(n in message for n in names), message


@pytest.mark.parametrize("var,text,expected", [
    ("BRRR_NUM_THREADS", "abc", "an integer >= 0"),
    ("BRRR_NUM_THREADS", "-2", "an integer >= 0"),
    ("BRRR_CACHE_MAX_BYTES", "4X", "'4G'"),
    ("BRRR_FUSION", "fast", "'cost', 'greedy' or 'none'"),
    ("BRRR_TARGET", "gpu", "'auto', 'cpp' or 'triton'"),
    ("BRRR_MODE", "turbo", "'reduce-overhead'"),
    ("BRRR_LOW_PRECISION", "bf16", "'eager' or 'float32'"),
    ("BRRR_LIBM", "sleef", "'fast' or 'accurate'"),
    ("BRRR_CACHE_DIR", "   ", "directory path"),
    ("BRRR_AUTOTUNE_MARGIN", "wide", "a number >= 1"),
])
def test_bad_variables_name_the_variable(var, text, expected):
    message = _error(environ={var: text})
    assert f"{var}={text!r}" in message and expected in message, message


def test_every_variable_is_read():
    values = {"BRRR_FUSION": "cost", "BRRR_DEVICE": "h100", "BRRR_CACHE_DIR": "/c",
              "BRRR_CACHE_MAX_BYTES": "1M", "BRRR_CALIBRATION_DIR": "/k",
              "BRRR_DEBUG_DIR": "/d", "BRRR_CXX": "clang++", "BRRR_NUM_THREADS": " 3",
              "BRRR_TARGET": "cpp", "BRRR_MODE": "max-autotune", "BRRR_CUDAGRAPHS": "0",
              "BRRR_STRICT": "yes", "BRRR_CHECK_STRIDES": "true", "BRRR_LOW_PRECISION": "eager",
              "BRRR_VERIFY_IR": "1", "BRRR_FOLD_ACROSS_ROWS": "0",
              "BRRR_AUTOTUNE_MARGIN": "2.5", "BRRR_SEGMENTS": "0", "BRRR_LIBM": "accurate"}
    assert set(values) == set(_ENV)
    cfg = build_config(environ=values)
    assert (cfg.fusion, cfg.device, cfg.cache_dir, cfg.cache_max_bytes, cfg.calibration_dir,
            cfg.debug_dir, cfg.cxx, cfg.num_threads, cfg.target, cfg.mode, cfg.cudagraphs,
            cfg.strict, cfg.check_strides, cfg.low_precision, cfg.verify_ir,
            cfg.fold_across_rows, cfg.autotune_margin, cfg.segments, cfg.libm) == (
        "cost", "h100", "/c", 1 << 20, "/k", "/d", "clang++", 3, "cpp", "max-autotune", False,
        True, True, "eager", True, False, 2.5, False, "accurate")


@pytest.mark.parametrize("mode,measures", [("default", False), ("reduce-overhead", False),
                                           ("max-autotune", True),
                                           ("max-autotune-no-cudagraphs", True)])
def test_only_the_autotune_modes_measure(mode, measures):
    cfg = build_config({"mode": mode, "autotune_margin": 2}, {})
    assert cfg.autotunes() is measures and cfg.autotune_margin == 2.0


def test_options_win_over_variables_and_empty_variables_are_unset():
    cfg = build_config({"num_threads": 2}, {"BRRR_NUM_THREADS": "5", "BRRR_TARGET": ""})
    assert cfg.num_threads == 2 and cfg.target == "auto"


@pytest.mark.parametrize("text,value", [("512", 512), ("512K", 512 << 10), ("3 MiB", 3 << 20),
                                        ("4G", 4 << 30), ("4gb", 4 << 30), ("1.5G", 3 << 29),
                                        ("0", 0)])
def test_cache_size_takes_units(text, value):
    assert build_config({"cache_max_bytes": text}, {}).cache_max_bytes == value
    assert build_config(environ={"BRRR_CACHE_MAX_BYTES": text}).cache_max_bytes == value


def test_unknown_key_suggests_the_closest_and_lists_all():
    message = _error({"num_thread": 4})
    assert "unknown option 'num_thread' (did you mean 'num_threads'?)" in message
    assert all(k in message for k in valid_keys())
    assert "did you mean" not in _error({"zzzz": 1})


def test_options_must_be_a_dict_with_string_keys():
    assert "options must be a dict" in _error(["fusion"])
    assert "option names are strings" in _error({3: 1})


def test_none_means_the_default_rule_where_documented():
    cfg = build_config({"device": None, "cxx": None, "cudagraphs": None, "passes": None}, {})
    assert cfg.device is None and cfg.cxx is None and cfg.passes is None
    assert "option num_threads=None" in _error({"num_threads": None})


def test_paths_expand_the_home_directory():
    assert build_config({"cache_dir": "~/x"}, {}).cache_dir == os.path.expanduser("~/x")


def test_option_error_is_both_value_and_type_error():
    assert issubclass(OptionError, ValueError) and issubclass(OptionError, TypeError)


# ---- modes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,graphs", [("default", False), ("reduce-overhead", True),
                                         ("max-autotune", True),
                                         ("max-autotune-no-cudagraphs", False)])
def test_modes_set_cuda_graphs_unless_asked_otherwise(mode, graphs):
    cfg = build_config({"mode": mode}, {})
    assert cfg.mode == mode and cfg.cudagraphs is None and cfg.wants_cudagraphs() is graphs
    assert build_config({"mode": mode, "cudagraphs": False}, {}).wants_cudagraphs() is False
    assert build_config({"mode": mode}, {"BRRR_CUDAGRAPHS": "1"}).wants_cudagraphs() is True


def test_with_mode_folds_torch_compile_mode_into_options():
    assert with_mode(None, None) is None
    assert with_mode({"fusion": "cost"}, None) == {"fusion": "cost"}
    assert with_mode(None, "max-autotune") == {"mode": "max-autotune"}
    assert with_mode({"mode": "max-autotune"}, "max-autotune") == {"mode": "max-autotune"}
    with pytest.raises(OptionError, match="disagree"):
        with_mode({"mode": "default"}, "reduce-overhead")


# ---- the README's options table --------------------------------------------------------

def test_readme_lists_every_option_and_variable():
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Options"):]
    section = section[:section.index("\n## ", 1)]
    table = section[section.index("| option | env | meaning |"):]
    rows = [line for line in table[:table.index("\n\n")].splitlines() if line.startswith("| `")]
    options = {re.match(r"\| `(\w+)`", row).group(1) for row in rows}
    assert options == set(valid_keys())
    for var, key in _ENV.items():
        row = next(r for r in rows if r.startswith(f"| `{key}`"))
        assert f"`{var}`" in row, f"README's row for {key} does not name {var}"
    assert all(f"| `{m}` |" in section for m in MODES)
