"""The checked-in manifests validate against experiments/schema/manifest.schema.json with
the reference `jsonschema` validator, and typical mistakes do not.

tests/cpu/test_manifest_schema.cpp keeps the schema's keys equal to the parser's; this
test checks the schema itself is a valid draft 2020-12 schema that accepts what the
project ships and rejects what the parser rejects.
"""

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from referencing import Registry, Resource

REPO = Path(__file__).resolve().parents[2]
SCHEMA_DIR = REPO / "experiments" / "schema"
SCHEMA = json.loads((SCHEMA_DIR / "manifest.schema.json").read_text())
# manifest.schema.json refers to its sibling files by relative $ref; each file's $id makes
# those references resolvable without network access.
REGISTRY = Registry().with_resources(
    (schema["$id"], Resource.from_contents(schema))
    for schema in (json.loads(p.read_text()) for p in sorted(SCHEMA_DIR.glob("*.schema.json")))
)
# profiles/ holds latency profiles (measured on first use, or kept as data: profiles/gpu/);
# measured/ holds runs measured on an H100 and on this CPU, kept as data. Neither holds manifests.
MANIFESTS = sorted(
    p for p in (REPO / "experiments").rglob("*.json") if not {"schema", "profiles", "measured"} & set(p.parts)
)


def validator():
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text()))
    return jsonschema.Draft202012Validator(SCHEMA, registry=REGISTRY)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: str(p.relative_to(REPO)))
def test_checked_in_manifest_validates(path):
    errors = list(validator().iter_errors(json.loads(path.read_text())))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


def test_mistakes_the_parser_rejects_are_rejected():
    base = json.loads((REPO / "experiments" / "quickstart.json").read_text())
    v = validator()
    assert v.is_valid(base)
    for edit in (
        lambda m: m["train"].update(lerning_rate=1),
        lambda m: m["methods"][0].update(budget="dts"),
        lambda m: m.update(sweep={"seed": []}),
        lambda m: m["methods"][0].update(attention={"name": "moba", "top_k": 0}),
        lambda m: m.update(name="../escape"),
        lambda m: m.pop("train"),
        # The blocks defined in simulation.schema.json are checked through the $ref too.
        lambda m: m.update(cluster={"preset": "tpu"}),
        lambda m: m.update(simulation={"latency_noise": {"sigma": -1}}),
        lambda m: m.update(simulation={"iteration_overhead": {}}),
        lambda m: m.update(simulation={"iteration_overhead": {"ms": 5}, "optimizer_ms": 1}),
    ):
        broken = copy.deepcopy(base)
        edit(broken)
        assert not v.is_valid(broken), broken
