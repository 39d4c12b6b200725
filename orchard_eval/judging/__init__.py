"""Concrete judges for `orchard_eval.judges` and what they need.

* `programmatic` — offline, deterministic measurements (OCR, colour/geometry, masks, sympy) for every
  criterion the pixels and the case's reference layers allow; −1 where it cannot judge honestly.
* `openai` — any OpenAI-compatible chat-completions endpoint (an MLLM judge) with retries, tolerant
  reply parsing, bounded concurrency and a persistent answer cache.
* `prompts` — the rubric prompt templates (versioned YAML under `rubric_prompts/`, user-replaceable).
* `cache` — the content-addressed on-disk cache of judge replies.
* `ocr` — RapidOCR wrapper (offline bundled models) with text normalisation helpers.
* `agreement` — judge cross-check statistics between two result directories (App. F, Table 14).

Judge modules register themselves with `orchard_eval.judges.register_judge` on import; `get_judge(name)`
imports `orchard_eval.judging.<name>` lazily, so optional dependencies load only when used.
"""
