"""The on-paper rows of docs/predicting.md, recomputed with the current model.

The table of Horovod's published scaling ("On paper, past this machine")
holds figures the cost model printed; a change to the model can move them
(the 512-GPU rows had moved unnoticed until 2026-11-28). This reads each
row of that table and predicts it again from the same synthetic profile.
Slow: the 512-GPU rows simulate 128 workers (about a minute each).
"""

import json
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from tf_cnn_benchmarks.commands import predict_scaling  # noqa: E402

DOC = os.path.join(REPO, 'docs', 'predicting.md')

# The doc's inputs (its "Inputs assumed"): the profile of each model and
# the single-GPU images/sec its efficiency is taken against.
MODELS = {
  'ResNet-101': ('profile_resnet101_p100_synthetic.json', 115.0),
  'Inception V3': ('profile_inception3_p100_synthetic.json', 142.0),
  'VGG-16': ('profile_vgg16_p100_synthetic.json', 154.0),
}
GPUS_PER_HOST = 4
ROW = re.compile(
  r'^\| (ResNet-101|Inception V3|VGG-16) \| (\d+) \| [^|]+ \| '
  r'([\d.]+)% \(([\d.]+)–([\d.]+)\) \|'
)


def doc_rows():
  """[(model, GPUs, efficiency %, band low %, band high %)] of the table."""
  with open(DOC, encoding='utf-8') as f:
    found = [ROW.match(line) for line in f]
  return [
    (m[1], int(m[2]), float(m[3]), float(m[4]), float(m[5])) for m in found if m
  ]


def test_the_table_is_found():
  rows = doc_rows()
  assert {r[0] for r in rows} == set(MODELS)
  assert len(rows) == 9


@pytest.mark.slow
@pytest.mark.parametrize('model', sorted(MODELS))
def test_each_row_is_what_the_model_predicts(model, tmp_path, capsys):
  profile, single_gpu = MODELS[model]
  rows = [r for r in doc_rows() if r[0] == model]
  out = tmp_path / 'p.jsonl'
  predict_scaling.main(
    [
      '--profile=' + os.path.join(REPO, 'tests', 'data', profile),
      '--num_workers=' + ','.join(str(r[1] // GPUS_PER_HOST) for r in rows),
      '--devices_per_worker=%d' % GPUS_PER_HOST,
      '--link_mbits=25000',
      '--variable_update=collective_all_reduce',
      '--json_out=%s' % out,
    ]
  )
  capsys.readouterr()
  lines = [json.loads(line) for line in out.read_text().splitlines()]
  by_gpus = {r['num_workers'] * GPUS_PER_HOST: r for r in lines}
  for _, gpus, efficiency, low, high in rows:
    ideal = gpus * single_gpu / 100.0
    line = by_gpus[gpus]
    got = (
      line['predicted_images_per_sec'] / ideal,
      line['band_low'] / ideal,
      line['band_high'] / ideal,
    )
    assert got == pytest.approx((efficiency, low, high), abs=0.051), gpus
