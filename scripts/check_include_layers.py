#!/usr/bin/env python3
"""Fails when a source file includes a project header from a layer above its own.

The project's folders are layers, bottom to top (docs/layout.md). A folder may include
headers of its own folder and of the folders below it, never of one above: the data flows
up (records, plans, results) and the dependencies point down. A subfolder belongs to the
layer of its nearest listed ancestor (harness/parallel/pipeline is in harness/parallel); a
subfolder listed itself has its own layer (harness/latency/run_profiles sits above config).

Usage: check_include_layers.py [--root DIR]   (default: the repository holding this script)
Prints one line per upward include (file:line: from -> to) and exits 1 if there is any;
exits 2 when a source folder is in no layer (a new folder must be placed in LAYERS).
"""

import argparse
import os
import re
import sys

# Bottom to top. Within one line the order still counts: a folder may include only the
# folders listed before it.
LAYERS = [
    "common",             # errors, statistics: no LibTorch
    "kernels",            # attention kernels (reference, CPU, CUDA)
    "models",             # Qwen2, safetensors, tokenizer
    "harness/common",     # files, JSON lines, JSON object reader, system info
    "harness/trace",      # per-rank timelines
    "harness/records",    # the iteration record every run writes
    "harness/data",       # samples, datasets, packed micro-batches
    "harness/latency",    # profiles, predictor, calibration
    "harness/parallel",   # process groups, layout, data parallel, pipeline
    "harness/eval",       # LongBench, NIAH, perplexity
    "harness/balance",    # batching and budget policies
    "harness/config",     # the manifest, parsed and resolved
    "harness/latency/run_profiles",  # the profiles a run or simulated run predicts with
    "harness/train",      # one rank's training loop
    "harness/report",     # tables across runs
    "harness/runner",     # runs a manifest: the run plan, folders, launcher, evaluation
    "harness/sim",        # the cluster simulator and its fits
    "harness/apps",       # the CLI
]
SOURCE_TOPS = ["common", "kernels", "models", "harness"]
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def layer_of(folder):
    """Index of the layer holding `folder` (a path relative to the root), or None."""
    best = None
    for index, layer in enumerate(LAYERS):
        if folder == layer or folder.startswith(layer + "/"):
            if best is None or len(layer) > len(LAYERS[best]):
                best = index
    return best


def check(root):
    upward, unplaced = [], set()
    for top in SOURCE_TOPS:
        for folder, _, files in os.walk(os.path.join(root, top)):
            relative_folder = os.path.relpath(folder, root)
            for name in sorted(files):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                source_layer = layer_of(relative_folder)
                if source_layer is None:
                    unplaced.add(relative_folder)
                    continue
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        match = INCLUDE.match(line)
                        if not match or "/" not in match.group(1):
                            continue
                        target_layer = layer_of(os.path.dirname(match.group(1)))
                        if target_layer is not None and target_layer > source_layer:
                            upward.append(f"{os.path.relpath(path, root)}:{number}: "
                                          f"{LAYERS[source_layer]} -> {LAYERS[target_layer]} "
                                          f"(#include \"{match.group(1)}\")")
    return upward, sorted(unplaced)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--root", default=default_root)
    args = parser.parse_args()
    upward, unplaced = check(args.root)
    for folder in unplaced:
        print(f"{folder}: in no layer; add it to LAYERS in {os.path.relpath(__file__, args.root)} "
              f"and to docs/layout.md")
    for line in upward:
        print(line)
    if unplaced:
        return 2
    if upward:
        print(f"{len(upward)} include(s) climb to a higher layer: move the shared piece down, "
              f"or pass what is needed from above as a parameter")
        return 1
    print(f"include layers: no upward include ({len(LAYERS)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
