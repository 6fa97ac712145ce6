"""The app's prediction after an edit equals the engine's (issue 12): the document validates
the edit once, builds the loop nest without validating again and predicts from it with warm
caches; the oracle predicts the same schedule with the pipeline's caches emptied."""

from __future__ import annotations

import random

from pytestqt.qtbot import QtBot

from app.model import edits
from app.model.document import Document
from engine import sampler
from engine.costmodel import default_model
from engine.costmodel import features as F


def test_an_edits_prediction_equals_the_engines(qtbot: QtBot) -> None:
    doc = Document()
    doc.open("harris", "small", "default")
    p = doc.pipeline
    assert p is not None
    rng = random.Random(1)
    seen = set()
    for k in range(8):
        changed = [s.name for s in p.stages if s.name not in p.outputs and doc.schedule.of(s.name).compute().kind != "compute_root"]
        if k % 2 and changed:  # an editor command (validates the result, as the undoable command does)
            new = edits.compute_root(p, doc.schedule, rng.choice(changed))
        else:  # a one-stage change as search makes it (validated by the sampler)
            new = sampler.mutate(p, doc.schedule, rng)
        doc.replace_schedule(new, validated=True)
        got = doc.prediction
        assert got is not None and doc.prediction_error == ""
        F.clear_caches(p)
        want = default_model().predict(p, new)
        assert got.total_ms == want.total_ms and got.stages == want.stages and got.model == want.model
        seen.add(round(got.total_ms, 9))
    assert len(seen) > 2, "the edits change the prediction (else the test proves little)"
