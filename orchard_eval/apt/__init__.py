"""Atomic physical transitions (APT): typed, timed state changes and their one-to-one matching.

`taxonomy` holds the 14 transition types and their mechanism domains; `matching` scores a predicted
chain against a ground-truth chain under the APT protocol (same type, within ±200 ms, each truth
matched at most once). Everything that scores transitions — Deduction answers' tracks, the APT chain
benchmark for video-language models — goes through these two modules.
"""
