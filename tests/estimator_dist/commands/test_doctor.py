"""``python -m estimator_dist.doctor``: the facts for a bug report, in text or JSON; exit 0."""
import json
import re

import pytest

from estimator_dist import mends
from estimator_dist.commands import doctor

_CPUINFO = """processor\t: 0
model name\t: Some CPU @ 2.0GHz
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16
"""


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_doctor_fresh_process_names_a_broken_tf_config(python_run):
    result = python_run(["-m", "estimator_dist.doctor"], timeout=240,
                        env={"TF_CONFIG": '{"cluster": '})
    assert result.returncode == 0, result.stderr[-2000:]
    assert "fault        TF_CONFIG must be valid JSON. Received: " in result.stdout
    release = mends.tensorflow_release()
    assert re.search(rf"^tensorflow(-cpu)? +{re.escape(release)}\.\d+$", result.stdout, re.M)
    assert re.search(r"^tensorflow-estimator +2\.15\.\d+$", result.stdout, re.M)
    assert f"## tensorflow\nrelease      {release}\n" in result.stdout
    restored = re.search(r"^tf\.estimator (.*)$", result.stdout, re.M)[1]
    if release == "2.15":
        assert restored == "TensorFlow's own"
        assert re.search(r"^estimator_api .*: not needed on TensorFlow 2\.15: ", result.stdout,
                         re.M)
    else:
        assert restored.startswith("restored (tensorflow-estimator 2.15.0) by mends ")
        assert "estimator_api" in restored and "estimator_training" in restored
    assert re.search(r"^startup hook (not installed|off|steps aside|on)", result.stdout, re.M)
    assert re.search(r"^tensorboard +\S", result.stdout, re.M)
    assert "\nfault        tensorflow/ must come from one distribution" not in result.stdout
    for line in ("## devices", "## cpu features", "avx512_bf16", "## launcher isolation"):
        assert line in result.stdout
    assert all(f"\n{name} " in result.stdout for name in mends.MENDS)


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_doctor_json_parses_with_the_resolved_tf_config(python_run):
    result = python_run(["-m", "estimator_dist.doctor", "--json"], timeout=240,
                        env={"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2",
                             mends.OFF_VARIABLE: "early_stopping"})
    assert result.returncode == 0, result.stderr[-2000:]
    facts = json.loads(result.stdout)
    assert facts["cluster"] == {"source": "SM_HOSTS", "fault": None, "tf_config": {
        "cluster": {"worker": ["algo-1:2222", "algo-2:2222"]},
        "task": {"type": "worker", "index": 1}}}
    assert facts["mends"]["early_stopping"]["state"] == f"off ({mends.OFF_VARIABLE})"
    assert facts["mends"]["cluster_train"]["state"] == "active"
    assert set(facts) == {"versions", "tensorflow", "devices", "cpu", "cluster", "mends",
                          "isolation"}
    assert facts["tensorflow"]["release"] == mends.tensorflow_release()
    assert facts["devices"]["mirrored_replicas"]


def test_cpu_features_reads_the_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(_CPUINFO)
    features = doctor.cpu_features(str(cpuinfo))
    assert features["model"] == "Some CPU @ 2.0GHz"
    assert (features["avx512_bf16"], features["amx_bf16"]) == (True, False)


def test_cpu_features_unreadable_is_unknown(tmp_path):
    features = doctor.cpu_features(str(tmp_path / "missing"))
    assert features["amx_bf16"] is None


def test_cluster_state_without_a_source_is_none():
    assert doctor.cluster_state({}) == {"source": None, "tf_config": None, "fault": None}


def test_mend_states_version_mismatch_shows_the_refusal(monkeypatch):
    monkeypatch.setattr(mends.releases, "tensorflow_release", lambda: "2.22")
    state = doctor.mend_states()["cluster_train"]["state"]
    assert state.startswith("refused: tensorflow must be one of 2.15, 2.16-2.21 for mend "
                            "'cluster_train'")
