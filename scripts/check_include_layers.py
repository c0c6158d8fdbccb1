#!/usr/bin/env python3
"""Fails when a source file includes a project header from a layer above its own, when an
attention pattern reaches into another, or when code outside the patterns asks which
pattern it holds.

Layers. The project's folders are layers, bottom to top (docs/layout.md). A folder may
include headers of its own folder and of the folders below it, never of one above: the
data flows up (records, plans, results) and the dependencies point down. A subfolder
belongs to the layer of its nearest listed ancestor (harness/parallel/pipeline is in
harness/parallel); a subfolder listed itself has its own layer (harness/latency/run_profiles
sits above config). kernels/attention is layered inside too: the block-sparse core, the
context-parallel ring, the patterns, then the benchmark driver (docs/attention_patterns.md).

Patterns. Each attention pattern is a folder under kernels/attention/patterns/ and one under
harness/patterns/ (the same name). A pattern's files include no other pattern's folders;
code outside the pattern folders includes none of them except the registry
(harness/patterns/attention_patterns.cpp), the benchmarks of one pattern's kernels
(kernels/bench) and MoBA's routing coverage (harness/eval/routing_coverage.cpp); and no code outside them switches on the pattern it holds (a comparison
with a pattern's name, a pattern's type or kind): it asks the AttentionPattern interface.

Usage: check_include_layers.py [--root DIR] [--metrics]   (default: the repository holding this script)
Prints one line per violation (file:line: what) and exits 1 if there is any; exits 2 when a
source folder is in no layer (a new folder must be placed in LAYERS). --metrics also prints
the counts the refactoring into patterns is measured by.
"""

import argparse
import os
import re
import sys

# Bottom to top. Within one line the order still counts: a folder may include only the
# folders listed before it.
LAYERS = [
    "common",                      # errors, statistics: no LibTorch
    "kernels/attention/core",      # block layout, block-sparse kernels, flash-varlen, the backend interface
    "kernels/attention/ring",      # the context-parallel ring engine
    "kernels/attention/patterns",  # the pattern interface and one folder per pattern
    "kernels/attention",           # the attention benchmark driver
    "kernels",                     # microbenchmarks
    "models",                      # Qwen2, safetensors, tokenizer
    "harness/common",              # files, JSON lines, JSON object reader, system info
    "harness/trace",               # per-rank timelines
    "harness/records",             # the iteration record every run writes, measured runs
    "harness/data",                # samples, datasets, packed micro-batches
    "harness/latency",             # profiles, predictor, calibration
    "harness/parallel",            # process groups, layout, data parallel, pipeline
    "harness/eval",                # LongBench, NIAH, perplexity
    "harness/balance",             # batching and budget policies
    "harness/patterns",            # each pattern's manifest keys, flags, simulation; the registry
    "harness/config",              # the manifest, parsed and resolved
    "harness/latency/run_profiles",  # the profiles a run or simulated run predicts with
    "harness/train",               # one rank's training loop
    "harness/report",              # tables across runs
    "harness/runner",              # runs a manifest: the run plan, folders, launcher, evaluation
    "harness/sim",                 # the cluster simulator and its fits
    "harness/apps",                # the CLI
    "harness/bench",               # the planner benchmark (a simulated run's planner)
]
SOURCE_TOPS = ["common", "kernels", "models", "harness"]
SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')

# Where patterns live: <prefix><name>/...
PATTERN_PREFIXES = ("kernels/attention/patterns/", "harness/patterns/")
# Outside the pattern folders, these may include them: the registry, the benchmarks of one
# pattern's kernels, and eval.coverage, which measures MoBA's routing by definition.
PATTERN_INCLUDE_EXCEPTIONS = ("harness/patterns/attention_patterns.cpp", "kernels/bench/",
                              "harness/eval/routing_coverage.cpp")
# A switch on the pattern held: its name compared, its type cast to or tested, an old kind enum.
PATTERN_NAME = r'"(?:dense|moba|vertical_slash|sliding_window)"'
SWITCH = re.compile(
    r"AttentionKind::|is_moba\(|is_vertical_slash\(|is_dense\(|is_sliding_window\("
    r"|dynamic_cast<\s*const\s+(?:Dense|Moba|VerticalSlash|SlidingWindow)\w*(?:Pattern|Attention)\b"
    r"|[!=]=\s*" + PATTERN_NAME + r"|" + PATTERN_NAME + r"\s*[!=]="
)
VERTICAL_SLASH = re.compile(r"vertical[-_ ]?slash", re.IGNORECASE)


def layer_of(folder):
    """Index of the layer holding `folder` (a path relative to the root), or None."""
    best = None
    for index, layer in enumerate(LAYERS):
        if folder == layer or folder.startswith(layer + "/"):
            if best is None or len(layer) > len(LAYERS[best]):
                best = index
    return best


def pattern_of(path):
    """The pattern whose folder holds `path` (relative), or None."""
    for prefix in PATTERN_PREFIXES:
        if path.startswith(prefix):
            rest = path[len(prefix):]
            if "/" in rest:
                return rest.split("/", 1)[0]
    return None


def source_files(root):
    for top in SOURCE_TOPS:
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    path = os.path.join(folder, name)
                    yield os.path.relpath(path, root), path


def check(root):
    upward, unplaced, crossing, switches = [], set(), [], []
    for relative, path in source_files(root):
        relative_folder = os.path.dirname(relative)
        source_layer = layer_of(relative_folder)
        if source_layer is None:
            unplaced.add(relative_folder)
            continue
        own_pattern = pattern_of(relative)
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        for number, line in enumerate(lines, 1):
            match = INCLUDE.match(line)
            if match and "/" in match.group(1):
                target = match.group(1)
                target_layer = layer_of(os.path.dirname(target))
                if target_layer is not None and target_layer > source_layer:
                    upward.append(f"{relative}:{number}: {LAYERS[source_layer]} -> {LAYERS[target_layer]} "
                                  f"(#include \"{target}\")")
                target_pattern = pattern_of(target)
                if target_pattern is not None and target_pattern != own_pattern:
                    if own_pattern is not None:
                        crossing.append(f"{relative}:{number}: pattern {own_pattern} includes pattern "
                                        f"{target_pattern} (#include \"{target}\")")
                    elif not relative.startswith(PATTERN_INCLUDE_EXCEPTIONS):
                        crossing.append(f"{relative}:{number}: includes pattern {target_pattern}'s folder "
                                        f"(#include \"{target}\"): use the AttentionPattern interface")
            if own_pattern is None and SWITCH.search(line.split("//", 1)[0]):
                switches.append(f"{relative}:{number}: switches on the attention pattern: {line.strip()}")
    return upward, sorted(unplaced), crossing, switches


def metrics(root):
    """The counts docs/attention_patterns.md reports: where patterns reach outside their folders."""
    switch_sites, naming_vs, generic_includes = 0, set(), 0
    for relative, path in source_files(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if pattern_of(relative) is None:
            switch_sites += sum(1 for line in text.splitlines() if SWITCH.search(line.split("//", 1)[0]))
            if VERTICAL_SLASH.search(text):
                naming_vs.add(relative)
            if relative.startswith("kernels/") and not relative.startswith("kernels/bench/"):
                generic_includes += sum(1 for m in INCLUDE.finditer(text) if pattern_of(m.group(1)))
    return {"pattern switch sites outside the pattern folders": switch_sites,
            "files outside the pattern folders naming vertical-slash": len(naming_vs),
            "generic kernel code including a pattern folder": generic_includes,
            "files naming vertical-slash": sorted(naming_vs)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--root", default=default_root)
    parser.add_argument("--metrics", action="store_true")
    args = parser.parse_args()
    upward, unplaced, crossing, switches = check(args.root)
    for folder in unplaced:
        print(f"{folder}: in no layer; add it to LAYERS in {os.path.relpath(__file__, args.root)} "
              f"and to docs/layout.md")
    for line in upward + crossing + switches:
        print(line)
    if args.metrics:
        for key, value in metrics(args.root).items():
            print(f"{key}: {value}")
    if unplaced:
        return 2
    if upward:
        print(f"{len(upward)} include(s) climb to a higher layer: move the shared piece down, "
              f"or pass what is needed from above as a parameter")
    if crossing or switches:
        print(f"{len(crossing)} include(s) cross into a pattern's folder and {len(switches)} line(s) switch on "
              f"the pattern: move the pattern-specific piece into its folders, behind AttentionPattern")
    if upward or crossing or switches:
        return 1
    print(f"include layers: no upward include ({len(LAYERS)} layers); patterns: no crossing, no switch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
