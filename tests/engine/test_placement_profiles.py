"""Device profiles: the shipped ones load and say they are simulated; a malformed file is one
ProfileError naming the file and the field at fault; the local profile is this machine's cores."""

import json
import os

import pytest

from engine.placement.costs import roofline_costs
from engine.placement.devices import ProfileError, load_profile, local_profile, shipped_profiles
from engine.placement.graph import from_pipeline
from engine.placement.simulator import simulate

GOOD = {
    "name": "t",
    "simulated": True,
    "description": "test figures",
    "devices": [
        {"name": "cpu0", "kind": "cpu", "peak_flops": 1e12, "mem_bandwidth": 1e11, "memory_bytes": 2**30},
        {"name": "gpu0", "kind": "gpu", "peak_flops": 1e13, "mem_bandwidth": 9e11, "memory_bytes": 2**34, "launch_s": 5e-6},
    ],
    "links": [{"a": "cpu0", "b": "gpu0", "latency_s": 1e-5, "bandwidth": 1.2e10}],
}


def test_the_shipped_profiles_load_and_are_labelled_simulated():
    names = shipped_profiles()
    assert {"cpu_gpu", "cpu_4gpu_pcie", "2hosts_2gpu", "memory_tight"} <= set(names)
    for name in names:
        prof = load_profile(name)
        assert prof.simulated and "simulated" in prof.description.lower()
        assert not any(d.measured for d in prof.devices)
        n = len(prof.devices)
        assert len(prof.links) == n * (n - 1) // 2  # every pair linked once
        for a in range(n):
            for b in range(n):
                if a != b:
                    assert prof.link(a, b) is prof.link(b, a)
    two_hosts = load_profile("2hosts_2gpu")
    inside = two_hosts.link(two_hosts.index("gpu0"), two_hosts.index("gpu1"))
    across = two_hosts.link(two_hosts.index("gpu0"), two_hosts.index("gpu2"))
    assert across.bandwidth < inside.bandwidth and across.latency_s > inside.latency_s  # the network is the slow link


def test_the_memory_tight_profile_does_not_hold_harris_on_one_device():
    from engine import zoo

    prof = load_profile("memory_tight")
    g = from_pipeline(zoo.get("harris", "full"))
    costs = roofline_costs(g, prof)
    assert not simulate(g, prof, costs, [0] * len(g)).valid
    roomy = load_profile("cpu_gpu")
    assert simulate(g, roomy, roofline_costs(g, roomy), [1] * len(g)).valid


def write(tmp_path, body, name="p.json"):
    path = tmp_path / name
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return str(path)


def changed(**edits):
    body = json.loads(json.dumps(GOOD))
    for where, value in edits.items():
        keys = where.split("__")
        obj = body
        for k in keys[:-1]:
            obj = obj[int(k)] if isinstance(obj, list) else obj[k]
        last = keys[-1]
        if value is KeyError:
            del obj[last]
        else:
            obj[int(last) if isinstance(obj, list) else last] = value
    return body


def test_a_good_file_loads(tmp_path):
    prof = load_profile(write(tmp_path, GOOD))
    assert [d.name for d in prof.devices] == ["cpu0", "gpu0"]
    assert prof.devices[1].launch_s == 5e-6 and prof.devices[0].host == "host0"
    assert prof.link(0, 1).seconds(1.2e10) == pytest.approx(1 + 1e-5)


@pytest.mark.parametrize(
    ("body", "field", "what"),
    [
        (changed(devices__0__peak_flops=-1), "devices[0].peak_flops", "> 0"),
        (changed(devices__1__kind="tpu"), "devices[1].kind", "cpu, gpu"),
        (changed(devices__0__memory_bytes=1.5), "devices[0].memory_bytes", "whole number"),
        (changed(devices__0__mem_bandwidth="fast"), "devices[0].mem_bandwidth", "finite number"),
        (changed(devices__1__name="cpu0"), "devices[1].name", "duplicate"),
        (changed(devices__0__peak_flops=KeyError), "devices[0].peak_flops", "missing"),
        (changed(devices__0__speed=3), "devices[0]", "unknown field 'speed'"),
        (changed(links__0__mtu=9000), "links[0]", "unknown field 'mtu' (fields: a, b, latency_s, bandwidth)"),
        (changed(owner="me"), "", "unknown field 'owner' (fields: description, devices, links, name, simulated)"),
        (changed(links__0__b="gpu9"), "links[0].b", "unknown device 'gpu9'"),
        (changed(links__0__bandwidth=0), "links[0].bandwidth", "> 0"),
        (changed(links__0__latency_s=-1e-6), "links[0].latency_s", ">= 0"),
        (changed(links=[]), ".links", "no link between 'cpu0' and 'gpu0'"),
        (changed(links__0__b="cpu0"), "links[0]", "no pair"),
        (changed(simulated="yes"), ".simulated", "true or false"),
        (changed(description=KeyError), ".description", "missing"),
        (changed(devices=[]), ".devices", "non-empty list"),
        ([1, 2], "", "JSON object"),
        ("{", "", "malformed JSON at line 1"),
    ],
)
def test_a_malformed_profile_is_one_error_naming_the_file_and_field(tmp_path, body, field, what):
    path = write(tmp_path, body)
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    message = str(err.value)
    assert message.startswith(path)
    assert field in message and what in message


def test_a_link_listed_twice_is_refused(tmp_path):
    body = changed()
    body["links"].append({"a": "gpu0", "b": "cpu0", "latency_s": 1e-5, "bandwidth": 1e10})
    with pytest.raises(ProfileError, match=r"links\[1\]: cpu0 <-> gpu0 is already linked by links\[0\]"):
        load_profile(write(tmp_path, body))


def test_an_unknown_name_or_missing_file_is_a_profile_error(tmp_path):
    with pytest.raises(ProfileError, match="unknown device profile 'nope'.*cpu_gpu"):
        load_profile("nope")
    with pytest.raises(ProfileError, match="no such device profile"):
        load_profile(str(tmp_path / "absent.json"))


def test_the_local_profile_is_this_machines_cores_measured():
    prof = local_profile()
    cores = sorted(os.sched_getaffinity(0))
    assert [d.name for d in prof.devices] == [f"cpu{c}" for c in cores]
    assert all(d.measured and d.kind == "cpu" for d in prof.devices)
    assert not prof.simulated
    assert all(d.peak_flops > 1e8 and d.mem_bandwidth > 1e8 for d in prof.devices)
    if len(cores) > 1:
        # Shared memory: a send is a memcpy by the sender's core, whose memory traffic is twice the bytes sent.
        assert prof.link(0, 1).bandwidth == pytest.approx(prof.devices[0].mem_bandwidth / 2)
        assert all(d.copy_on_core for d in prof.devices)
    assert load_profile("local") is not None


def test_a_profile_round_trips_through_its_json():
    from engine.placement.devices import parse_profile

    for name in shipped_profiles():
        prof = load_profile(name)
        again = parse_profile(json.loads(json.dumps(prof.to_json())), "again.json")
        assert again.devices == prof.devices
        assert {(lk.a, lk.b, lk.latency_s, lk.bandwidth) for lk in again.links} == {
            (lk.a, lk.b, lk.latency_s, lk.bandwidth) for lk in prof.links
        }
