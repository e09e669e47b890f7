"""The engine's beam search rules over the numpy reference forward pass,
shared by the engine's and the server's beam tests."""

from __future__ import annotations


def reference_beam_search(model, prompt, width, n, max_tokens, length_penalty=1.0, eos=1):
    """Beam search over the numpy reference forward pass, with the engine's rules:
    2*width candidates per beam, continuations ending in EOS become hypotheses
    (score = cumulative logprob / output_length^length_penalty, EOS counted in
    the length, not in the tokens), stop at max_tokens or when no live beam can
    beat the worst of `width` hypotheses."""
    import numpy as np
    import ref_forward

    def penalized(cum, length):
        return cum / max(length, 1) ** length_penalty

    beams = [(list(prompt), 0.0)]
    hyps = []

    def add(tokens, score):
        hyps.append((score, tokens))
        hyps.sort(key=lambda h: -h[0])
        del hyps[width:]

    for step in range(max_tokens):
        cands = []
        for bi, (toks, cum) in enumerate(beams):
            logits = np.asarray(ref_forward.ref_logits(str(model), toks, kv_type="f32"))[-1].astype(np.float64)
            lp = logits - logits.max()
            lp = lp - np.log(np.exp(lp).sum())
            top = sorted(range(len(lp)), key=lambda t: (-lp[t], t))[: 2 * width]
            cands += [(cum + lp[t], bi, t) for t in top]
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        nxt = []
        for score, bi, t in cands:
            if len(nxt) == width:
                break
            if t == eos:
                add(beams[bi][0][len(prompt):], penalized(score, step + 1))
            else:
                nxt.append((score, bi, t))
        if not nxt:
            break
        if len(hyps) >= width and penalized(nxt[0][0], step + 1) <= min(h[0] for h in hyps):
            break
        if step + 1 >= max_tokens:
            for score, bi, t in nxt:
                add(beams[bi][0][len(prompt):] + [t], penalized(score, step + 1))
            break
        beams = [(beams[bi][0] + [t], score) for score, bi, t in nxt]
    return [h[1] for h in hyps[:n]]
