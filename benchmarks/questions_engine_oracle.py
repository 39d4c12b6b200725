"""Answer analytic-derived questions from the MuJoCo engine trajectories (gt/states.npz engine/*): a
second, independent source of tracks. Usage: benchmarks/questions_engine_oracle.py DATASET QUESTIONS_DIR"""
import sys
import numpy as np
from orchard_eval.cases import load_dataset, ObjectTracks
from orchard_eval.questions import answer_questions, score_answers
from orchard_eval.questions.commands import read_questions
ds = load_dataset(sys.argv[1], strict=True); docs = read_questions(sys.argv[2]); ans = {}
for cid, doc in docs.items():
    c = ds.cases[cid]; p = c.path / "gt" / "states.npz"
    with np.load(p) as z:
        ids = [o.id for o in c.objects]
        pos = {o: z[f"engine/{o}/position"].reshape(-1, 3) for o in ids if f"engine/{o}/position" in z.files}
        vel = {o: z[f"engine/{o}/linear_velocity"].reshape(-1, 3) for o in ids if f"engine/{o}/linear_velocity" in z.files}
        tr = ObjectTracks(times=z["times"], positions=pos, velocities=vel, source="engine")
    ans[cid] = answer_questions(doc, tr, c.events or ())
r = score_answers(docs, ans); print("overall", r["overall"])
for k, v in r["by_task"].items(): print(k, v)
