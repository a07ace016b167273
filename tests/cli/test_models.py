#!/usr/bin/env python3
"""`lmc models` on a fake Hugging Face cache laid out as huggingface_hub writes
it (blobs/<hash>, snapshots/<rev>/<file> -> ../../blobs/<hash>, refs/main):
a quantized registry model, a dense model with a subfolder and a sparse 1.7 GB
blob, a mixed-bit VLM, a dangling blob link, a broken config.json, and entries
that are no models (an interrupted download, a dataset, .locks). Checks the
table and --json (sizes, architecture, quantization, registry rows cached or
not downloaded, the shipped model's row), --paths / --verbose, and the exit
codes: 0, 2 for usage errors, 1 for a cache that cannot be read; --help on
stdout.

Environment (set by ctest): LMC_CLI (build/lmc), LMC_SOURCE_DIR."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

LMC = os.environ.get("LMC_CLI", "build/lmc")
SOURCE = os.environ.get("LMC_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SHIPPED = os.path.join(SOURCE, "models", "kjv-llama-11m-4bit")

REV = "0123456789abcdef0123456789abcdef01234567"
OLD_REV = "89abcdef0123456789abcdef0123456789abcdef"
GB_17 = 1_700_000_000  # a sparse blob: "1.7 GB" without the disk space
FIELDS = {"name", "hub_id", "dir", "kind", "model_type", "quantization", "size_bytes", "cached",
          "registry"}


def human(n):
    """The CLI's sizes: decimal units, one decimal."""
    if n < 1000:
        return f"{n} B"
    v, units = n / 1000, ["kB", "MB", "GB", "TB", "PB", "EB"]
    u = 0
    while v >= 999.95 and u + 1 < len(units):
        v /= 1000
        u += 1
    return f"{v:.1f} {units[u]}"


class FakeRepo:
    """CACHE/models--ORG--NAME: add() writes a blob and links a snapshot file to it."""

    def __init__(self, cache, folder):
        self.root = os.path.join(cache, folder)
        os.makedirs(os.path.join(self.root, "blobs"), exist_ok=True)

    def snapshot(self, rev):
        path = os.path.join(self.root, "snapshots", rev)
        os.makedirs(path, exist_ok=True)
        return path

    def add(self, rev, name, data=b"", size=None):
        """A file of the snapshot; size makes a sparse blob of that many bytes."""
        digest = hashlib.sha256(data + name.encode() + rev.encode() + str(size).encode())
        blob = os.path.join(self.root, "blobs", digest.hexdigest())
        with open(blob, "wb") as f:
            f.write(data)
            if size is not None:
                f.truncate(size)
        link = os.path.join(self.snapshot(rev), name)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        depth = name.count("/")
        os.symlink(os.path.join(*[".."] * (2 + depth), "blobs", digest.hexdigest()), link)
        return size if size is not None else len(data)

    def add_json(self, rev, name, obj):
        return self.add(rev, name, json.dumps(obj, indent=2).encode())

    def ref(self, rev):
        os.makedirs(os.path.join(self.root, "refs"), exist_ok=True)
        with open(os.path.join(self.root, "refs", "main"), "w") as f:
            f.write(rev + "\n")


def split_row(line):
    return re.split(r"\s{2,}", line.strip())


class ModelsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="lmc-cli-models-")
        cls.cache = os.path.join(cls.tmp, "hub")
        cache = cls.cache
        cls.sizes, cls.snaps = {}, {}

        # a registry model (qwen3:4b), MLX 4-bit g64; refs/main names REV, an
        # older snapshot with another config is not the one listed
        q = FakeRepo(cache, "models--mlx-community--Qwen3-4B-4bit")
        quant = {"group_size": 64, "bits": 4, "mode": "affine"}
        n = q.add_json(REV, "config.json", {"model_type": "qwen3", "quantization": quant,
                                            "quantization_config": quant,
                                            "torch_dtype": "bfloat16"})
        n += q.add(REV, "model.safetensors", b"\0" * 3000)
        n += q.add(REV, "tokenizer.json", b"{}" * 250)
        with open(os.path.join(q.snapshot(REV), "README.md"), "wb") as f:  # a plain file too
            f.write(b"x" * 123)
        n += 123
        q.ref(REV)
        q.add_json(OLD_REV, "config.json", {"model_type": "qwen2", "torch_dtype": "float32"})
        q.add(OLD_REV, "model.safetensors", b"\0" * 99999)
        os.utime(q.snapshot(OLD_REV), (2e9, 2e9))  # newer, but refs/main wins
        cls.sizes["mlx-community/Qwen3-4B-4bit"] = n
        cls.snaps["mlx-community/Qwen3-4B-4bit"] = q.snapshot(REV)

        # a dense model, no refs/main: its only snapshot; files in a subfolder, a sparse blob
        d = FakeRepo(cache, "models--org--dense-llama")
        n = d.add_json(REV, "config.json", {"model_type": "llama", "torch_dtype": "float16"})
        n += d.add(REV, "model.safetensors", size=GB_17)
        n += d.add(REV, "original/params.json", b"{}")
        cls.sizes["org/dense-llama"] = n
        cls.snaps["org/dense-llama"] = d.snapshot(REV)

        # a VLM (vision_config), mixed 4/8-bit, the dtype only in text_config
        v = FakeRepo(cache, "models--org--tiny-vlm")
        n = v.add_json(REV, "config.json", {
            "model_type": "paligemma", "vision_config": {"hidden_size": 8},
            "text_config": {"model_type": "gemma", "torch_dtype": "bfloat16"},
            "quantization": {"group_size": 64, "bits": 4,
                             "language_model.model.layers.0.mlp.down_proj":
                                 {"group_size": 64, "bits": 8},
                             "vision_tower.patch_embed": False}})
        n += v.add(REV, "model.safetensors", b"\1" * 4600)
        v.ref(REV)
        cls.sizes["org/tiny-vlm"] = n
        cls.snaps["org/tiny-vlm"] = v.snapshot(REV)

        # a blob not downloaded: its dangling link counts 0
        g = FakeRepo(cache, "models--org--dangling")
        n = g.add_json(REV, "config.json", {"model_type": "mistral", "dtype": "float32"})
        os.symlink("../../blobs/" + "f" * 64, os.path.join(g.snapshot(REV), "model.safetensors"))
        cls.sizes["org/dangling"] = n
        cls.snaps["org/dangling"] = g.snapshot(REV)

        # a config.json that is not JSON: listed, architecture and quantization unknown
        b = FakeRepo(cache, "models--org--bad-json")
        cls.sizes["org/bad-json"] = b.add(REV, "config.json", b"{\"model_type\": ,}")
        cls.snaps["org/bad-json"] = b.snapshot(REV)

        # no models: an interrupted download, a dataset, the hub client's own files
        FakeRepo(cache, "models--org--partial").add(REV, "model.safetensors", b"\0" * 10)
        FakeRepo(cache, "datasets--org--data").add_json(REV, "config.json", {"model_type": "x"})
        os.makedirs(os.path.join(cache, ".locks", "models--org--dense-llama"))
        with open(os.path.join(cache, "version.txt"), "w") as f:
            f.write("1")

        # a stand-in for the shipped model, found through LMC_MODELS_DIR
        cls.models_dir = os.path.join(cls.tmp, "shipped")
        cls.shipped = os.path.join(cls.models_dir, "kjv-llama-11m-4bit")
        os.makedirs(cls.shipped)
        with open(os.path.join(cls.shipped, "config.json"), "w") as f:
            json.dump({"model_type": "llama", "quantization": {"group_size": 32, "bits": 8}}, f)
        with open(os.path.join(cls.shipped, "model.safetensors"), "wb") as f:
            f.write(b"\0" * 4_600_000)
        cls.shipped_size = 4_600_000 + os.path.getsize(os.path.join(cls.shipped, "config.json"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def run_lmc(self, *args, cache=None, models_dir=True):
        env = dict(os.environ)
        for k in ("HF_HOME", "LMC_MODELS_DIR"):
            env.pop(k, None)
        env["HF_HUB_CACHE"] = cache or self.cache
        env["HOME"] = self.tmp
        if models_dir:
            env["LMC_MODELS_DIR"] = self.models_dir
        return subprocess.run([LMC, "models", *args], env=env, capture_output=True, text=True,
                              timeout=60)

    def ok(self, *args, **kw):
        r = self.run_lmc(*args, **kw)
        self.assertEqual(r.returncode, 0, f"lmc models {' '.join(args)}: {r.stderr}")
        return r.stdout

    def table(self, out):
        """{'registry': [cells...], 'other': [cells...]} with the header rows checked."""
        lines = out.splitlines()
        self.assertEqual(lines[0], "Registry:")
        self.assertEqual(split_row(lines[1])[:6], ["NAME", "HUB ID", "KIND", "SIZE", "ARCH",
                                                  "QUANT"])
        registry, i = [], 2
        while lines[i]:
            registry.append(split_row(lines[i]))
            i += 1
        other = []
        if lines[i + 1].startswith("Other models in the Hugging Face cache ("):
            self.assertIn(self.cache, lines[i + 1])
            self.assertEqual(split_row(lines[i + 2])[:5], ["HUB ID", "KIND", "SIZE", "ARCH",
                                                          "QUANT"])
            other = [split_row(l) for l in lines[i + 3:]]
        else:
            self.assertTrue(lines[i + 1].startswith("No other models in the Hugging Face cache"))
            self.assertEqual(len(lines), i + 2)
        return {"registry": registry, "other": other}

    def test_table(self):
        t = self.table(self.ok())
        reg = {row[0]: row for row in t["registry"]}
        self.assertEqual(reg["qwen3:4b"], [
            "qwen3:4b", "mlx-community/Qwen3-4B-4bit", "LLM",
            human(self.sizes["mlx-community/Qwen3-4B-4bit"]), "qwen3", "4-bit g64"])
        self.assertEqual(reg["llama3.2:1b"], [
            "llama3.2:1b", "mlx-community/Llama-3.2-1B-Instruct-4bit", "LLM", "not downloaded"])
        self.assertEqual(reg["paligemma:3b"][2:], ["VLM", "not downloaded"])
        self.assertEqual(reg["kjv:11m"], ["kjv:11m", "(local folder)", "LLM",
                                          human(self.shipped_size), "llama", "8-bit g32"])
        self.assertEqual(human(self.shipped_size), "4.6 MB")
        # the others, sorted by hub id (ignoring case), the registry's one not repeated
        self.assertEqual(t["other"], [
            ["org/bad-json", "LLM", human(self.sizes["org/bad-json"]), "?", "?"],
            ["org/dangling", "LLM", human(self.sizes["org/dangling"]), "mistral", "f32"],
            ["org/dense-llama", "LLM", "1.7 GB", "llama", "f16"],
            ["org/tiny-vlm", "VLM", human(self.sizes["org/tiny-vlm"]), "paligemma",
             "mixed 4/8-bit g64"],
        ])
        self.assertEqual(human(self.sizes["org/tiny-vlm"]), "5.0 kB")

    def test_paths(self):
        for flag in ("--paths", "-p", "--verbose"):
            t = self.table(self.ok(flag))
            reg = {row[0]: row for row in t["registry"]}
            self.assertEqual(reg["qwen3:4b"][6], self.snaps["mlx-community/Qwen3-4B-4bit"])
            self.assertEqual(reg["kjv:11m"][6], os.path.realpath(self.shipped))
            self.assertEqual(len(reg["llama3.2:1b"]), 4)
            for row in t["other"]:
                self.assertEqual(row[5], self.snaps[row[0]], flag)

    def test_json(self):
        models = json.loads(self.ok("--json"))
        self.assertIsInstance(models, list)
        for m in models:
            self.assertEqual(set(m), FIELDS)
            self.assertIn(m["kind"], ("llm", "vlm"))
            self.assertEqual(m["cached"], m["dir"] is not None)
            self.assertEqual(m["registry"], m["name"] is not None)
        by_name = {m["name"]: m for m in models if m["registry"]}
        self.assertEqual(by_name["qwen3:4b"], {
            "name": "qwen3:4b", "hub_id": "mlx-community/Qwen3-4B-4bit",
            "dir": self.snaps["mlx-community/Qwen3-4B-4bit"], "kind": "llm",
            "model_type": "qwen3", "quantization": "4-bit g64",
            "size_bytes": self.sizes["mlx-community/Qwen3-4B-4bit"], "cached": True,
            "registry": True})
        self.assertEqual(by_name["paligemma:3b"], {
            "name": "paligemma:3b", "hub_id": "mlx-community/paligemma-3b-mix-448-8bit",
            "dir": None, "kind": "vlm", "model_type": None, "quantization": None,
            "size_bytes": None, "cached": False, "registry": True})
        self.assertEqual(by_name["kjv:11m"], {
            "name": "kjv:11m", "hub_id": None, "dir": os.path.realpath(self.shipped),
            "kind": "llm", "model_type": "llama", "quantization": "8-bit g32",
            "size_bytes": self.shipped_size, "cached": True, "registry": True})
        # every built-in preset is there, registry rows first
        names = [m["name"] for m in models if m["registry"]]
        for name in ("llama3.2:1b", "mistral:7b", "phi3.5", "gemma2:2b", "smollm2:1.7b"):
            self.assertIn(name, names)
        first_other = next(i for i, m in enumerate(models) if not m["registry"])
        self.assertTrue(all(not m["registry"] for m in models[first_other:]))
        others = models[first_other:]
        self.assertEqual([m["hub_id"] for m in others],
                         ["org/bad-json", "org/dangling", "org/dense-llama", "org/tiny-vlm"])
        for m in others:
            self.assertEqual(m["size_bytes"], self.sizes[m["hub_id"]])
            self.assertEqual(m["dir"], self.snaps[m["hub_id"]])
            self.assertTrue(m["cached"])
            self.assertIsNone(m["name"])
        dense = others[2]
        self.assertEqual((dense["model_type"], dense["quantization"], dense["kind"]),
                         ("llama", "f16", "llm"))
        self.assertGreater(dense["size_bytes"], GB_17)
        vlm = others[3]
        self.assertEqual((vlm["model_type"], vlm["quantization"], vlm["kind"]),
                         ("paligemma", "mixed 4/8-bit g64", "vlm"))
        self.assertEqual((others[0]["model_type"], others[0]["quantization"]), (None, None))

    def test_no_cache(self):
        missing = os.path.join(self.tmp, "no-such-cache")
        t = self.table(self.ok(cache=missing))
        self.assertEqual(t["other"], [])
        reg = {row[0]: row for row in t["registry"]}
        self.assertEqual(reg["qwen3:4b"][3], "not downloaded")
        models = json.loads(self.ok("--json", cache=missing))
        self.assertTrue(all(m["registry"] for m in models))
        self.assertFalse(any(m["cached"] for m in models if m["name"] != "kjv:11m"))

    def test_shipped_model(self):
        """The model shipped in the repository, when it is there."""
        if not os.path.isfile(os.path.join(SHIPPED, "config.json")):
            print(f"SKIPPED: no shipped model at {SHIPPED}")
            return
        models = json.loads(self.ok("--json", models_dir=False))
        kjv = [m for m in models if m["name"] == "kjv:11m"]
        self.assertEqual(len(kjv), 1)
        self.assertTrue(kjv[0]["cached"] and kjv[0]["registry"])
        self.assertIsNone(kjv[0]["hub_id"])
        self.assertEqual(kjv[0]["model_type"], "llama")
        self.assertGreater(kjv[0]["size_bytes"], 0)
        if kjv[0]["dir"] == os.path.realpath(SHIPPED):
            total = sum(os.path.getsize(os.path.join(r, f))
                        for r, _, files in os.walk(SHIPPED) for f in files)
            self.assertEqual(kjv[0]["size_bytes"], total)
        reg = {row[0]: row for row in self.table(self.ok(models_dir=False))["registry"]}
        self.assertEqual(reg["kjv:11m"][1:4], ["(local folder)", "LLM",
                                               human(kjv[0]["size_bytes"])])

    def test_broken_folder_preset(self):
        """A registry folder whose config.json is not JSON: listed with "?", a warning, exit 0."""
        models_dir = os.path.join(self.tmp, "broken-shipped")
        folder = os.path.join(models_dir, "kjv-llama-11m-4bit")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            f.write("{\"model_type\": ")
        env_dir, self.models_dir = self.models_dir, models_dir
        try:
            r = self.run_lmc()
            j = self.run_lmc("--json")
        finally:
            self.models_dir = env_dir
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("lmc models: kjv:11m: ", r.stderr)
        self.assertIn("config.json", r.stderr)
        reg = {row[0]: row for row in self.table(r.stdout)["registry"]}
        self.assertEqual(reg["kjv:11m"], ["kjv:11m", "(local folder)", "LLM", "?", "?", "?"])
        self.assertEqual(j.returncode, 0, j.stderr)
        kjv = next(m for m in json.loads(j.stdout) if m["name"] == "kjv:11m")
        self.assertEqual(kjv, {"name": "kjv:11m", "hub_id": None,
                               "dir": os.path.realpath(folder), "kind": "llm", "model_type": None,
                               "quantization": None, "size_bytes": None, "cached": True,
                               "registry": True})

    def test_usage(self):
        r = self.run_lmc("--help")
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith("usage: lmc models"))
        self.assertIn("--json", r.stdout)
        self.assertEqual(r.stderr, "")
        for args in (["--bogus"], ["-x"], ["extra"], ["--json=1"]):
            r = self.run_lmc(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(r.stdout, "")
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
            self.assertIn("lmc models:", r.stderr)
        self.assertIn("unknown option '--bogus'", self.run_lmc("--bogus").stderr)

    def test_unreadable_cache(self):
        """A cache folder that cannot be listed (a symlink loop) is a runtime error."""
        loop = os.path.join(self.tmp, "loop")
        if not os.path.lexists(loop):
            os.symlink("loop", loop)
        for args in ([], ["--json"]):
            r = self.run_lmc(*args, cache=loop)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertEqual(r.stdout, "")
            self.assertIn("cannot list the hub cache", r.stderr)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
