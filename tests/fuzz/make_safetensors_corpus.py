#!/usr/bin/env python3
"""Writes the seed corpus tests/fuzz/corpus/safetensors/ (standard library only).

valid_*.safetensors must be accepted by the reader (and by the reference
`safetensors` package), bad_*.safetensors must be rejected with std::runtime_error:
tests/cpu/test_safetensors.cpp checks both on every ctest run, and the libFuzzer
target (tests/fuzz/safetensors_fuzz.cpp) starts from them. Every file is under 4 KB.
The output is deterministic; rerun after changing this script and commit the result:

    python3 tests/fuzz/make_safetensors_corpus.py
"""

import json
import struct
from pathlib import Path

OUT = Path(__file__).resolve().parent / "corpus" / "safetensors"


def image(header: str, data: bytes = b"", pad: bool = True) -> bytes:
    """8-byte little-endian header length, header (space-padded to 8), data."""
    raw = header.encode("utf-8")
    if pad:
        raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + data


def entry(dtype: str, shape, begin: int, end: int) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def header_of(entries: dict, metadata=None) -> str:
    obj = {}
    if metadata is not None:
        obj["__metadata__"] = metadata
    obj.update(entries)
    return json.dumps(obj, separators=(",", ":"))


def all_dtypes() -> bytes:
    # (dtype, shape, little-endian bytes)
    tensors = [
        ("BF16", [2], struct.pack("<HH", 0x3F80, 0xC000)),  # 1.0, -2.0
        ("F16", [2], struct.pack("<HH", 0x3C00, 0x3800)),  # 1.0, 0.5
        ("F32", [2, 2], struct.pack("<4f", 1.5, -2.0, 0.0, 3.25)),
        ("F64", [], struct.pack("<d", 2.0 / 3.0)),
        ("I64", [2], struct.pack("<2q", -(1 << 62), (1 << 62) + 5)),
        ("I32", [3], struct.pack("<3i", -7, 0, 2**31 - 1)),
        ("I16", [2], struct.pack("<2h", -32768, 300)),
        ("I8", [3], struct.pack("<3b", -128, 0, 127)),
        ("U8", [1, 3], bytes([0, 128, 255])),
        ("BOOL", [4], bytes([1, 0, 0, 1])),
    ]
    entries, data = {}, b""
    for dtype, shape, raw in tensors:
        entries[dtype.lower()] = entry(dtype, shape, len(data), len(data) + len(raw))
        data += raw
    metadata = {"format": "pt", "source": "make_safetensors_corpus.py"}
    return image(header_of(entries, metadata), data)


def main() -> None:
    f32x2 = entry("F32", [2], 0, 8)
    zeros8 = bytes(8)
    files = {
        # accepted
        "valid_empty_header": image("{}"),
        "valid_metadata_only": image(header_of({}, {"k": "v"})),
        "valid_all_dtypes": all_dtypes(),
        "valid_unpadded_header": image(header_of({"a": entry("I16", [4], 0, 8)}),
                                       struct.pack("<4h", 1, -1, -32768, 0x1234), pad=False),
        "valid_scalar_and_empty": image(
            header_of({"s": entry("F32", [], 0, 4), "e": entry("F64", [0, 5], 4, 4),
                       "z": entry("U8", [3, 0], 4, 4)}),
            struct.pack("<f", 3.5)),
        # rejected by the header checks
        "bad_shorter_than_length": b"\x02\x00\x00",
        "bad_header_length_zero": struct.pack("<Q", 0) + b"{}",
        "bad_header_over_100_mib": struct.pack("<Q", 100 * 1024 * 1024 + 1) + b"{}",
        "bad_header_longer_than_file": struct.pack("<Q", 64) + b'{"a":{}}',
        "bad_json": image('{"a": {"dtype": "F32",'),
        "bad_invalid_utf8": struct.pack("<Q", 8) + b'{"\xff":{}}',
        "bad_not_an_object": image("[1, 2]"),
        # found by the fuzzer: nlohmann reports numbers beyond double as out_of_range
        "bad_number_overflow": image('{"__metadata__":{},"a":1e999}'),
        "bad_duplicate_name": image('{"a":%s,"a":%s}' % (json.dumps(f32x2), json.dumps(f32x2)),
                                    zeros8),
        "bad_entry_not_object": image('{"a":5}'),
        "bad_missing_dtype": image(header_of({"a": {"shape": [2], "data_offsets": [0, 8]}}),
                                   zeros8),
        "bad_missing_shape": image(header_of({"a": {"dtype": "F32", "data_offsets": [0, 8]}}),
                                   zeros8),
        "bad_missing_data_offsets": image(header_of({"a": {"dtype": "F32", "shape": [2]}}),
                                          zeros8),
        "bad_unknown_dtype": image(header_of({"a": entry("F8_E4M3", [8], 0, 8)}), zeros8),
        "bad_negative_shape": image(header_of({"a": entry("F32", [2, -1], 0, 8)}), zeros8),
        "bad_shape_overflow": image(header_of({"a": entry("F32", [2**32, 2**32], 0, 8)}), zeros8),
        "bad_deeply_nested_shape": image('{"a":{"dtype":"F32","shape":' + "[" * 1500 + "]" * 1500 +
                                         ',"data_offsets":[0,0]}}'),
        "bad_offsets_begin_after_end": image(header_of({"a": entry("F32", [0], 8, 0)}), zeros8),
        "bad_offsets_beyond_data": image(header_of({"a": entry("F32", [2], 8, 16)}), zeros8),
        "bad_offsets_huge": image(header_of({"a": entry("U8", [1], 2**64 - 2, 2**64 - 1)}),
                                  zeros8),
        "bad_truncated_data": image(header_of({"a": entry("F32", [4], 0, 16)}), zeros8),
        "bad_size_mismatch": image(header_of({"a": entry("F32", [3], 0, 8)}), zeros8),
        "bad_overlap": image(header_of({"a": entry("F32", [2], 0, 8),
                                        "b": entry("F32", [2], 4, 12)}), bytes(12)),
        "bad_gap": image(header_of({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 12, 20)}),
                         bytes(20)),
        "bad_trailing_bytes": image(header_of({"a": f32x2}), bytes(13)),
        "bad_metadata_not_string": image('{"__metadata__":{"step":3}}'),
        # accepted header, rejected when the tensor is read
        "bad_bool_byte_2": image(header_of({"b": entry("BOOL", [3], 0, 3)}), bytes([1, 2, 0])),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.safetensors"):
        old.unlink()
    for name, content in sorted(files.items()):
        assert len(content) < 4096, name
        (OUT / f"{name}.safetensors").write_bytes(content)
    print(f"wrote {len(files)} files to {OUT}")


if __name__ == "__main__":
    main()
