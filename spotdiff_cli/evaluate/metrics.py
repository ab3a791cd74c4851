"""Caption metrics: pycocoevalcap's scorers called one by one, plus a faithful CIDEr-D.

Every scorer takes ``{id: [reference, ...]}`` and ``{id: [hypothesis]}`` (pycocoevalcap's
interface) after tokenisation and gives one corpus score and one score per item.

* Tokeniser: pycocoevalcap's Stanford PTBTokenizer (Java), run exactly as pycocoevalcap 1.2 runs
  it (``-preserveLines -lowerCase``, then its punctuation list dropped) but with the temporary file
  in the system temp folder (pycocoevalcap writes into its own, possibly read-only, package
  folder) and the Java progress line silenced. Without ``java`` a Python tokenizer that imitates
  it is used and the result says so: scores can then differ in the third decimal.
* BLEU-1..4, ROUGE-L, CIDEr: pycocoevalcap 1.2. "CIDEr" is its ``Cider``: what the COCO server
  and the Spot-the-diff authors print as "CIDEr" (the 0.3506 of the regression anchor). Reading its
  code shows it already computes the CIDEr-D formula (clipped counts, Gaussian length penalty,
  x10) with document frequencies from the scored corpus' references.
* CIDEr-D: implemented here independently after Vedantam et al. 2015 §4 and the reference
  ``CiderD`` code (vrama91/cider, ruotianluo/cider): TF-IDF n-gram vectors (n=1..4, document
  frequency over this corpus' references), hypothesis counts clipped by the reference counts,
  Gaussian length penalty with sigma 6, mean over references, times 10. It agrees with "CIDEr"
  to every digit (a test checks it), so it is off by default to avoid a duplicate column; ask for
  it with ``metrics=("CIDEr-D", ...)`` when a paper's table says CIDEr-D.
* METEOR: pycocoevalcap's METEOR 1.5 (Java). Skipped, with the reason, without ``java``.
* SPICE is never run: it needs Stanford CoreNLP models downloaded at first use, which is not
  possible offline. Results say so.

Java costs about a second per start (more on a busy machine), and an evaluation with breakdowns
scores ~14 groups x 2 protocols. A :class:`ScoringSession` therefore owns the Java work of a whole
evaluation: it tokenises every distinct caption once (PTB tokenisation of a line does not depend on
the other lines, so a per-string cache is exact) and keeps one METEOR process for all groups
(METEOR's EVAL over a group's statistics lines is independent of earlier requests). Without a
session, ``score_captions`` opens and closes one of its own, as before.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DataError

ALL_METRICS = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "CIDEr-D")
DEFAULT_METRICS = ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr")
SPICE_NOTE = (
    "SPICE not computed: it needs Stanford CoreNLP models downloaded at first use (offline here)"
)

# pycocoevalcap 1.2's tokenizer drops these tokens after PTB tokenisation.
PUNCTUATIONS = {
    "''",
    "'",
    "``",
    "`",
    "-LRB-",
    "-RRB-",
    "-LCB-",
    "-RCB-",
    ".",
    "?",
    "!",
    ",",
    ":",
    "-",
    "--",
    "...",
    ";",
}

Refs = dict[str, list[str]]


@dataclass
class MetricResult:
    """Corpus scores by metric name, per-item scores (same id order as ``ids``), what was
    skipped and why, and which tokenizer ran."""

    scores: dict[str, float]
    per_item: dict[str, list[float]]
    ids: list[str]
    tokenizer: str
    skipped: dict[str, str] = field(default_factory=dict)


def java_available() -> bool:
    return shutil.which("java") is not None


# ----------------------------------------------------------------------------------------------
# tokenisers


def ptb_tokenize(captions: Refs) -> Refs:
    """pycocoevalcap's PTBTokenizer, line for line (see module docstring for the two changes)."""
    from pycocoevalcap.tokenizer import ptbtokenizer

    jar = os.path.join(
        os.path.dirname(os.path.abspath(ptbtokenizer.__file__)),
        ptbtokenizer.STANFORD_CORENLP_3_4_1_JAR,
    )
    keys = [k for k, v in captions.items() for _ in range(len(v))]
    text = "\n".join(c.replace("\n", " ") for v in captions.values() for c in v)
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as handle:
        handle.write(text.encode())
        name = handle.name
    try:
        cmd = [
            "java",
            "-cp",
            jar,
            "edu.stanford.nlp.process.PTBTokenizer",
            "-preserveLines",
            "-lowerCase",
            name,
        ]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    finally:
        os.remove(name)
    if done.returncode != 0:
        raise DataError(
            "the PTB tokenizer (java) failed; check `java -version` or run without java for the Python tokenizer"
        )
    lines = done.stdout.decode().split("\n")
    out: Refs = {}
    for key, line in zip(keys, lines):
        out.setdefault(key, []).append(
            " ".join(w for w in line.rstrip().split(" ") if w not in PUNCTUATIONS)
        )
    # zip() stops at the shorter list; a short output would silently drop references.
    if sum(len(v) for v in out.values()) != len(keys):
        raise DataError(
            "the PTB tokenizer returned fewer lines than captions; a caption may hold a control character"
        )
    return out


_TOKEN = re.compile(r"\w+(?=n't)|n't|'\w*|\w+|[^\w\s]")


def python_tokenize(captions: Refs) -> Refs:
    """A Java-free imitation of PTB tokenisation + pycocoevalcap's punctuation filter: lower-case,
    split off punctuation and clitics ("n't", "'s"), drop punctuation tokens."""
    out: Refs = {}
    for key, values in captions.items():
        out[key] = [
            " ".join(
                t
                for t in _TOKEN.findall(c.lower().replace("\n", " "))
                if t not in PUNCTUATIONS and t.strip()
            )
            for c in values
        ]
    return out


# ----------------------------------------------------------------------------------------------
# one tokenizer pass and one METEOR process per evaluation


def resolve_tokenizer(tokenizer: str = "auto") -> str:
    """ "auto" -> "ptb" when java exists, else "python"; "ptb" without java is an error."""
    if tokenizer not in ("auto", "ptb", "python"):
        raise DataError(f"unknown tokenizer '{tokenizer}'; use ptb, python or auto")
    have_java = java_available()
    if tokenizer == "auto":
        return "ptb" if have_java else "python"
    if tokenizer == "ptb" and not have_java:
        raise DataError(
            "the PTB tokenizer needs java on PATH; install a JRE or use --tokenizer python"
        )
    return tokenizer


class ScoringSession:
    """Shared tokenisation and METEOR process for many ``score_captions`` calls.

    Use as a context manager (the METEOR process is stopped on exit). ``prepare(captions)``
    tokenises every caption that will be scored in one tokenizer run; later ``tokenize`` calls
    only run the tokenizer for strings it has not seen. ``java_starts`` counts the Java processes
    started, per purpose ("ptb", "meteor"), so callers and tests can see the sharing work.
    """

    def __init__(self, tokenizer: str = "auto") -> None:
        self.tokenizer = resolve_tokenizer(tokenizer)
        self.have_java = java_available()
        self._tokens: dict[str, str] = {}
        self._meteor: Any = None
        self.java_starts: dict[str, int] = {"ptb": 0, "meteor": 0}

    def prepare(self, captions: Iterable[str]) -> None:
        """Tokenise all ``captions`` not yet known, in one run of the tokenizer."""
        captions = list(dict.fromkeys(captions))  # a generator would be exhausted by the first pass
        # Blank strings never reach Java: they tokenise to "" and an empty line is the one input
        # that could make PTB's output lines disagree with its input lines.
        new = [c for c in dict.fromkeys(captions) if c not in self._tokens and c.strip()]
        for c in dict.fromkeys(captions):
            if not c.strip():
                self._tokens[c] = ""
        if not new:
            return
        if self.tokenizer == "ptb":
            self.java_starts["ptb"] += 1
            done = ptb_tokenize({"all": new})["all"]
        else:
            done = python_tokenize({"all": new})["all"]
        self._tokens.update(zip(new, done))

    def tokenize(self, captions: Refs) -> Refs:
        """Tokenised copy of ``{id: [caption, ...]}`` (tokenizer runs only for unseen strings)."""
        self.prepare(c for values in captions.values() for c in values)
        return {k: [self._tokens[c] for c in v] for k, v in captions.items()}

    def meteor(self) -> Any:
        """The session's METEOR 1.5 scorer, started on first use."""
        if self._meteor is None:
            from pycocoevalcap.meteor.meteor import Meteor

            self.java_starts["meteor"] += 1
            self._meteor = Meteor()
        return self._meteor

    def close(self) -> None:
        if self._meteor is not None:
            _close_meteor(self._meteor)
            self._meteor = None

    def __enter__(self) -> ScoringSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ----------------------------------------------------------------------------------------------
# CIDEr-D


def _ngrams(tokens: list[str], n: int = 4) -> dict[tuple[str, ...], int]:
    counts: dict[tuple[str, ...], int] = defaultdict(int)
    for k in range(1, n + 1):
        for i in range(len(tokens) - k + 1):
            counts[tuple(tokens[i : i + k])] += 1
    return counts


class CiderD:
    """CIDEr-D (Vedantam et al. 2015, §4 "CIDEr-D"), as in the reference ``CiderD`` scorer.

    Hypothesis n-gram weights are clipped by the reference's (``min(hyp, ref) * ref``) so that
    repeating a rewarded n-gram gains nothing; a Gaussian penalty (sigma 6) on the length
    difference; document frequencies from this corpus' references; the mean over references is
    multiplied by 10. Quirk kept for parity with the reference code: the "length" compared is the
    number of bigrams.
    """

    def __init__(self, n: int = 4, sigma: float = 6.0) -> None:
        self.n = n
        self.sigma = sigma

    def compute_score(self, gts: Refs, res: Refs) -> tuple[float, np.ndarray]:
        ids = list(res)
        crefs = [[_ngrams(r.split(), self.n) for r in gts[i]] for i in ids]
        ctest = [_ngrams(res[i][0].split(), self.n) for i in ids]
        df: dict[tuple[str, ...], float] = defaultdict(float)
        for refs in crefs:
            for ngram in {g for ref in refs for g in ref}:
                df[ngram] += 1
        ref_len = np.log(float(len(crefs)))

        def vec(counts: dict[tuple[str, ...], int]) -> tuple[list[dict], list[float], int]:
            v: list[dict] = [defaultdict(float) for _ in range(self.n)]
            norm = [0.0] * self.n
            length = 0
            for ngram, tf in counts.items():
                k = len(ngram) - 1
                v[k][ngram] = float(tf) * (ref_len - np.log(max(1.0, df[ngram])))
                norm[k] += v[k][ngram] ** 2
                if k == 1:
                    length += tf
            return v, [math.sqrt(x) for x in norm], length

        scores = []
        for test, refs in zip(ctest, crefs):
            vh, nh, lh = vec(test)
            total = np.zeros(self.n)
            for ref in refs:
                vr, nr, lr = vec(ref)
                penalty = np.e ** (-((lh - lr) ** 2) / (2 * self.sigma**2))
                for k in range(self.n):
                    val = sum(
                        min(w, vr[k].get(g, 0.0)) * vr[k].get(g, 0.0) for g, w in vh[k].items()
                    )
                    if nh[k] != 0 and nr[k] != 0:
                        val /= nh[k] * nr[k]
                    total[k] += val * penalty
            scores.append(float(np.mean(total)) / max(1, len(refs)) * 10.0)
        arr = np.array(scores)
        return float(arr.mean()) if len(arr) else 0.0, arr


# ----------------------------------------------------------------------------------------------
# scoring


def score_captions(
    references: Refs,
    hypotheses: dict[str, str],
    metrics: tuple[str, ...] | list[str] | None = None,
    tokenizer: str = "auto",
    session: ScoringSession | None = None,
) -> MetricResult:
    """Score one hypothesis per id against that id's references.

    references: id -> reference sentences (at least one each; empty strings allowed, as in the
        Spot-the-diff files). hypotheses: id -> one hypothesis string; every id must have
        references. tokenizer: "ptb" (needs java), "python", or "auto" (ptb when java exists).
    session: share tokenisation and the METEOR process with other calls (its tokenizer then
        wins over ``tokenizer``); without one, a private session is opened and closed here.
    Metrics that cannot run are in ``skipped`` with the reason, never silently zero.
    """
    if session is None:
        with ScoringSession(tokenizer) as own:
            return score_captions(references, hypotheses, metrics, tokenizer, own)
    wanted = tuple(metrics) if metrics else DEFAULT_METRICS
    unknown = [m for m in wanted if m not in ALL_METRICS]
    if unknown:
        raise DataError(
            f"unknown metric(s) {', '.join(unknown)}; choose from {', '.join(ALL_METRICS)}"
        )
    ids = [str(i) for i in hypotheses]
    missing = [i for i in ids if not references.get(i)]
    if missing:
        raise DataError(
            f"no references for {len(missing)} prediction(s), e.g. id {missing[0]}; is it the right split?"
        )
    if not ids:
        raise DataError("nothing to score: no predictions")
    skipped: dict[str, str] = {}
    have_java = session.have_java
    tokenizer = session.tokenizer
    gts = session.tokenize({i: list(references[i]) for i in ids})
    res = session.tokenize({i: [hypotheses[i]] for i in ids})

    scores: dict[str, float] = {}
    per_item: dict[str, list[float]] = {}
    if any(m.startswith("BLEU") for m in wanted):
        from pycocoevalcap.bleu.bleu import Bleu

        corpus, items = Bleu(4).compute_score(gts, res, verbose=0)
        for k in range(4):
            name = f"BLEU-{k + 1}"
            if name in wanted:
                scores[name] = float(corpus[k])
                per_item[name] = [float(x) for x in items[k]]
    if "METEOR" in wanted:
        if not have_java:
            skipped["METEOR"] = (
                "needs java (METEOR 1.5 is a Java program); install a JRE to compute it"
            )
        else:
            try:
                corpus, items = session.meteor().compute_score(gts, res)
            except BaseException:
                # A half-read reply would desynchronise the pipe for the next group: restart.
                session.close()
                raise
            scores["METEOR"] = float(corpus)
            per_item["METEOR"] = [float(x) for x in items]
    if "ROUGE-L" in wanted:
        from pycocoevalcap.rouge.rouge import Rouge

        corpus, items = Rouge().compute_score(gts, res)
        scores["ROUGE-L"] = float(corpus)
        per_item["ROUGE-L"] = [float(x) for x in items]
    for name in ("CIDEr", "CIDEr-D"):
        if name not in wanted:
            continue
        if len(ids) < 2:
            # IDF over one pair is log(1) = 0: the number would be meaningless.
            skipped[name] = "a corpus statistic: needs at least 2 pairs"
            continue
        if name == "CIDEr":
            from pycocoevalcap.cider.cider import Cider

            corpus, items = Cider().compute_score(gts, res)
        else:
            corpus, items = CiderD().compute_score(gts, res)
        scores[name] = float(corpus)
        per_item[name] = [float(x) for x in items]
    skipped["SPICE"] = SPICE_NOTE
    # Every pycocoevalcap scorer iterates its input dict in key order, which is ``ids`` here.
    return MetricResult(scores, per_item, ids, tokenizer, skipped)


def _close_meteor(meteor: object) -> None:
    """Stop METEOR's Java process now rather than at garbage collection. pycocoevalcap's
    ``__del__`` is idempotent (closing a closed pipe and killing a reaped process are no-ops)."""
    meteor.__del__()  # type: ignore[attr-defined]


def tokens(text: str) -> list[str]:
    """Whitespace tokens of an already tokenised string (helper for LenRatio and stats)."""
    return text.split()
