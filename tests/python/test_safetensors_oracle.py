"""The C++ safetensors reader and writer checked against the reference `safetensors` package.

Reading: files and a sharded checkpoint written by safetensors.torch.save_file are
dumped by build/tests/sb_safetensors_dump (one JSON line per tensor: dtype, shape,
float64 sum and sum of squares); the same numbers are computed here from the tensors
the reference wrote: exactly for integers (below 2^53 in total), to 1e-12 relative otherwise.
Writing: the C++ writer's example file (sb_safetensors_dump --write-example) loads with
safetensors.torch.load_file and equals the tensors rebuilt here from the formulas in
tests/support/safetensors_dump_main.cpp, element by element.
Rejecting: the fuzz corpus' valid_* files load in both; its bad_* files are rejected
by both, except the few where the C++ reader is deliberately stricter.
"""

import json
import math
import os
import struct
import subprocess
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load, load_file, save_file

REPO = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("SB_BUILD_DIR", REPO / "build"))
DUMP = BUILD_DIR / "tests" / "sb_safetensors_dump"
CORPUS = REPO / "tests" / "fuzz" / "corpus" / "safetensors"

INTEGER_DTYPES = {"I64", "I32", "I16", "I8", "U8", "BOOL"}
DTYPE_NAMES = {
    torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}
# bad_* corpus files the reference loads but the C++ reader rejects on purpose (see
# models/safetensors/safetensors_file.h): a BOOL byte of 2, a name given twice, and
# F8_E4M3, a format dtype this reader does not support.
STRICTER_THAN_REFERENCE = {"bad_bool_byte_2", "bad_duplicate_name", "bad_unknown_dtype"}


@pytest.fixture(scope="module")
def dump_binary():
    # scripts/test.sh always builds it; a missing binary is a failure, not a skip.
    assert DUMP.is_file(), (f"{DUMP} not found: build the sb_safetensors_dump target "
                            f"(SB_BUILD_DIR={BUILD_DIR})")
    return DUMP


def run_dump(binary, *args):
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          errors="replace", timeout=120)


def dump_lines(binary, path):
    proc = run_dump(binary, path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {line["name"]: line for line in map(json.loads, proc.stdout.splitlines())}


def reference_tensors():
    """Every supported dtype with seeded values; integers small enough that float64 sums of
    them and of their squares are exact in any order."""
    g = torch.Generator().manual_seed(2024)
    return {
        "model.embed_tokens.weight": torch.randn(17, 8, generator=g).to(torch.bfloat16),
        "f16": torch.randn(5, 3, generator=g).to(torch.float16),
        "f32": torch.randn(4, 6, 2, generator=g),
        "f64": torch.randn(11, generator=g, dtype=torch.float64),
        "i64": torch.randint(-(1 << 20), 1 << 20, (3, 7), generator=g, dtype=torch.int64),
        "i32": torch.randint(-(1 << 20), 1 << 20, (9,), generator=g, dtype=torch.int32),
        "i16": torch.randint(-32768, 32768, (4, 4), generator=g, dtype=torch.int16),
        "i8": torch.randint(-128, 128, (13,), generator=g, dtype=torch.int8),
        "u8": torch.randint(0, 256, (2, 2, 2), generator=g, dtype=torch.uint8),
        "bool": torch.randint(0, 2, (10,), generator=g).to(torch.bool),
        "scalar": torch.tensor(-1.75, dtype=torch.float32),
        "empty": torch.zeros(0, 4, dtype=torch.float16),
    }


def check_line(line, tensor):
    values = [float(v) for v in tensor.to(torch.float64).flatten().tolist()]
    assert line["dtype"] == DTYPE_NAMES[tensor.dtype]
    assert line["shape"] == list(tensor.shape)
    if line["dtype"] in INTEGER_DTYPES and sum(int(v) ** 2 for v in values) < 2**53:
        # Every term and partial sum is an integer below 2^53: exact in any order.
        assert line["sum"] == sum(int(v) for v in values)
        assert line["sum_sq"] == sum(int(v) ** 2 for v in values)
    else:
        scale = math.fsum(abs(v) for v in values)
        assert line["sum"] == pytest.approx(math.fsum(values), rel=1e-12, abs=1e-12 * scale)
        assert line["sum_sq"] == pytest.approx(math.fsum(v * v for v in values), rel=1e-12)


def test_reads_a_file_written_by_the_reference(dump_binary, tmp_path):
    tensors = reference_tensors()
    path = tmp_path / "reference.safetensors"
    metadata = {"format": "pt", "written_by": "safetensors.torch.save_file"}
    save_file(tensors, str(path), metadata=metadata)
    lines = dump_lines(dump_binary, path)
    assert sorted(lines) == sorted(tensors)
    for name, tensor in tensors.items():
        check_line(lines[name], tensor)
    proc = run_dump(dump_binary, "--metadata", path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == metadata


def test_reads_a_sharded_checkpoint_written_by_the_reference(dump_binary, tmp_path):
    tensors = reference_tensors()
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:5],
              "model-00002-of-00002.safetensors": names[5:]}
    weight_map, total_size = {}, 0
    for file_name, shard_names in shards.items():
        save_file({n: tensors[n] for n in shard_names}, str(tmp_path / file_name),
                  metadata={"format": "pt"})
        for n in shard_names:
            weight_map[n] = file_name
            total_size += tensors[n].numel() * tensors[n].element_size()
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total_size}, "weight_map": weight_map}, indent=2))
    lines = dump_lines(dump_binary, tmp_path)
    assert sorted(lines) == names
    for name, tensor in tensors.items():
        check_line(lines[name], tensor)

    # A weight_map that omits a tensor one shard holds: both sides must notice.
    del weight_map[names[0]]
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    proc = run_dump(dump_binary, tmp_path)
    assert proc.returncode == 1
    assert "which the weight_map does not list" in proc.stderr


def example_tensors():
    """The formulas of example_tensors() in tests/support/safetensors_dump_main.cpp."""
    def arange(n):
        return torch.arange(n, dtype=torch.float32)

    return {
        "bf16": ((arange(16) - 8) * 0.5).reshape(4, 4).to(torch.bfloat16),
        "f16": (arange(12) * 0.125 - 0.75).reshape(3, 4).to(torch.float16),
        "f32": (arange(24) * 0.25 - 3).reshape(2, 3, 4),
        "f32_transposed": torch.tensor([[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]),
        "f64": torch.arange(10, dtype=torch.float64) / 7,
        "i64": torch.tensor([-(1 << 62), -1, 0, 1, (1 << 62) + 5, 2**63 - 1], dtype=torch.int64),
        "i32": torch.tensor([[-(2**31), -7, 0], [7, 2**31 - 1, 123456]], dtype=torch.int32),
        "i16": torch.tensor([-32768, -1, 0, 1, 32767, 300], dtype=torch.int16),
        "i8": torch.tensor([-128, -1, 0, 1, 127], dtype=torch.int8),
        "u8": torch.tensor([0, 1, 128, 254, 255], dtype=torch.uint8),
        "bool": torch.tensor([True, False, False, True, True]),
        "scalar": torch.tensor(3.5, dtype=torch.float32),
        "empty_f32": torch.zeros(0, 3, dtype=torch.float32),
        "empty_i64": torch.zeros(2, 0, dtype=torch.int64),
    }


def test_reference_reads_the_cpp_writer(dump_binary, tmp_path):
    path = tmp_path / "example.safetensors"
    proc = run_dump(dump_binary, "--write-example", path)
    assert proc.returncode == 0, proc.stderr
    # Nothing but the file: the temporary sibling was renamed into place.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["example.safetensors"]
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    assert header_len % 8 == 0
    loaded = load_file(str(path))
    expected = example_tensors()
    assert sorted(loaded) == sorted(expected)
    for name, tensor in expected.items():
        assert loaded[name].dtype == tensor.dtype, name
        assert loaded[name].shape == tensor.shape, name
        assert torch.equal(loaded[name], tensor), name
    with safe_open(str(path), framework="pt") as f:
        assert f.metadata() == {"format": "pt", "producer": "sb_safetensors_dump"}
    # The data follows the writer's order (that of example_tensors()), without gaps.
    header = json.loads(raw[8:8 + header_len])
    offsets = [header[name]["data_offsets"] for name in expected]
    assert offsets[0][0] == 0
    assert all(a[1] == b[0] for a, b in zip(offsets, offsets[1:]))
    assert offsets[-1][1] == len(raw) - 8 - header_len


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.safetensors")), ids=lambda p: p.stem)
def test_corpus_verdicts_agree_with_the_reference(dump_binary, path):
    proc = run_dump(dump_binary, path)
    try:
        reference = load(path.read_bytes())
    except Exception as error:  # the reference raises SafetensorError (and others for some inputs)
        reference = error
    if path.stem.startswith("valid_"):
        assert not isinstance(reference, Exception), reference
        assert proc.returncode == 0, proc.stderr
        lines = {line["name"]: line for line in map(json.loads, proc.stdout.splitlines())}
        assert sorted(lines) == sorted(reference)
        for name, tensor in reference.items():
            check_line(lines[name], tensor)
    else:
        assert path.stem.startswith("bad_")
        assert proc.returncode == 1 and f"error: {path}" in proc.stderr, proc.stdout + proc.stderr
        if path.stem in STRICTER_THAN_REFERENCE:
            assert not isinstance(reference, Exception), "the reference now rejects it too"
        else:
            assert isinstance(reference, Exception), "the reference accepts this file"
