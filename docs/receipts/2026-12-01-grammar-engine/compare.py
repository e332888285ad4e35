"""llguidance vs outlines-core on the default model's tokenizer (49,152 tokens): compile
time per schema and per-token mask time along a valid reply. xgrammar is not measured:
its wheel requires torch (and transformers, triton) at import.

    PYTHONPATH=. python docs/receipts/2026-12-01-grammar-engine/compare.py
(outlines-core must be importable; it was installed into a scratch venv for this run.)
"""
import json
import statistics
import time

import numpy as np

from server.engine.locate import default_gguf
from server.text.tokenizer import Tokenizer

SCHEMAS = {
    "flat": ({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False},
             {"name": "Ada", "age": 36}),
    "nested": ({"type": "object", "properties": {"user": {"type": "object", "properties": {
        "id": {"type": "integer", "minimum": 0, "maximum": 9999},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
        "required": ["id", "tags"], "additionalProperties": False},
        "ok": {"type": "boolean"}}, "required": ["user", "ok"], "additionalProperties": False},
        {"user": {"id": 42, "tags": ["a", "c"]}, "ok": True}),
    "pattern": ({"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                                                  "n": {"type": "number", "minimum": 0, "maximum": 10}},
                 "required": ["code", "n"], "additionalProperties": False},
                {"code": "ABC-1234", "n": 2.5}),
    "wide": ({"type": "object", "properties": {f"f{i}": {"type": "string", "maxLength": 12} for i in range(20)},
              "required": [f"f{i}" for i in range(20)], "additionalProperties": False},
             {f"f{i}": "v" for i in range(20)}),
}


def byte_decoder():
    """GPT-2's byte-level alphabet, inverted: a BPE piece's characters -> its bytes."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def ms(xs):
    return f"mean {1e3 * statistics.mean(xs):.3f} ms, max {1e3 * max(xs):.3f} ms"


def main():
    tok = Tokenizer.from_gguf(default_gguf())
    V = tok.vocab_size
    import llguidance as llg
    t0 = time.perf_counter()
    llt = llg.LLTokenizer(tok.hf.to_str(), n_vocab=V, eos_token=sorted(tok.eos_ids))
    print(f"llguidance {llg.__version__}: tokenizer {time.perf_counter() - t0:.2f} s")
    try:
        import outlines_core as oc
        t0 = time.perf_counter()
        vocab = {}
        dec = byte_decoder()
        for i in range(V):
            if i in tok.eos_ids:
                continue
            piece = tok.hf.id_to_token(i)
            if piece.startswith("<|") or piece.startswith("<") and piece.endswith(">") and len(piece) > 2 and piece[1:-1].replace("_", "").isalpha():
                continue                        # special tokens
            vocab.setdefault(bytes(dec[ch] for ch in piece), []).append(i)
        ocv = oc.Vocabulary(tok.eos_id, vocab)
        print(f"outlines-core: vocabulary {time.perf_counter() - t0:.2f} s")
    except ImportError:
        oc = None
    for name, (schema, value) in SCHEMAS.items():
        text = json.dumps(value)
        ids = tok.encode(text, add_special_tokens=False)
        t0 = time.perf_counter()
        m = llg.LLMatcher(llt, llg.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}))
        c = time.perf_counter() - t0
        words = np.zeros((V + 31) // 32, dtype=np.int32)
        ts = []
        for i in ids:
            t0 = time.perf_counter()
            m.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
            ts.append(time.perf_counter() - t0)
            assert m.consume_token(i), m.get_error()
        print(f"{name:8s} llguidance:    compile {1e3 * c:8.1f} ms; mask {ms(ts)} over {len(ids)} tokens")
        if oc is not None:
            t0 = time.perf_counter()
            regex = oc.json_schema.build_regex_from_schema(json.dumps(schema), r"[ ]?")
            index = oc.Index(regex, ocv)
            c = time.perf_counter() - t0
            guide = oc.Guide(index)
            ts = []
            ok = True
            for i in ids:
                t0 = time.perf_counter()
                guide.write_mask_into(words.ctypes.data, words.size, words.itemsize)
                ts.append(time.perf_counter() - t0)
                try:
                    guide.advance(i)
                except Exception:
                    ok = False
                    break
            print(f"{name:8s} outlines-core: compile {1e3 * c:8.1f} ms; mask {ms(ts)} over "
                  f"{len(ts)} tokens{'' if ok else ' (rejected the reply: tokenization mismatch)'}")


if __name__ == "__main__":
    main()
