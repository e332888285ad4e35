"""Rank 0's sampling of a round's rows, the scheduler's one door to server/engine's
sampler, logits and prompt logprobs (the scheduler is control plane: it imports neither
numpy nor server/engine). Each driver (server/step_driver.py) carries one as `sampling`."""
from __future__ import annotations

from server.engine.logits import argmax_rows
from server.engine.prompt_logprobs import prompt_logprobs
from server.engine.sampler import SamplerState, device_token, logprobs, prepare_masks, sample


class HostSampling:
    """Rank 0's sampling of a round's logits, on whichever device holds them (`device`:
    the engine's, "cpu" or "cuda")."""

    def __init__(self, device: str = "cpu"):
        self.device = device

    # the arguments pass through as they are: server/engine/sampler.py and logits.py define them
    def sampler_state(self, *args, **kw):
        return SamplerState(*args, **kw)

    def argmax_rows(self, *args, **kw) -> list:
        return argmax_rows(*args, **kw)

    def sample(self, *args, **kw):
        return sample(*args, **kw)

    def drawn(self, tok, state, logits, row):
        """A token the device sampler drew for `state` -> (token, logprob, top logprobs); its
        logprobs (when asked) from a copy of the raw row `row` of `logits`."""
        tok = device_token(tok, state)
        state.record(tok)
        lp, top = logprobs(logits[row], state, tok) if state.params.logprobs is not None \
            else (None, ())
        return tok, lp, top

    def verifies(self, state) -> bool:
        """Whether a verify chunk's rows can be drawn for `state` as plain decoding draws
        them (server/drafts/verify.py): on the CPU every row is drawn by the host sampler,
        so always; on GPUs sampled rows follow the device's counter-based draw, which the
        verify walk does not run, so plain greedy streams only."""
        return state.plain_greedy or self.device == "cpu"

    def prompt_logprobs(self, *args, **kw) -> list:
        return prompt_logprobs(*args, **kw)

    def prepare_masks(self, states) -> None:
        """The round's grammar masks, computed while the ranks run it."""
        prepare_masks(states)
