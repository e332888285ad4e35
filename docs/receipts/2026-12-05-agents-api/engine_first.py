import time, sys
from server.engine.build import open_model
from server.generate import generate
from server.requests import SamplingParams
opened = open_model(None, progress=False)
tok = opened.tokenizer
def run(label, ids, new, temp=0.0):
    t = time.monotonic()
    generate(opened, ids, SamplingParams(max_tokens=new, temperature=temp, seed=1, ignore_eos=True))
    print(f"{label}: {time.monotonic() - t:.3f} s", flush=True)
warm = [(11 + 97 * i) % 49152 for i in range(int(sys.argv[1]))]
readme = tok.encode("<|im_start|>user\nWhat does a GPU do?<|im_end|>\n<|im_start|>assistant\n" * 2)[:36]
run("warm-up %d tokens, 3 new" % len(warm), warm, 3)
run("readme-like 36 tokens, 1 new (first)", readme, 1)
run("readme-like 36 tokens, 1 new (again)", readme, 1)
run("readme-like 36 tokens, 1 new, temperature 1", readme, 1, 1.0)
