"""The sequence builder on hand-checked episodes, against a loop-by-loop reference, and resumed."""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.actors.sequencer import SequenceBuilder
from border_py.envs.vector import VectorEnv, VectorStep
from border_py.sequences import STORED_SEQUENCE, Sequences


def _vstep(next_obs, reward, terminated, truncated) -> VectorStep:
    """A step whose ended envs' next observation to act on is a reset one, 99 (never stored in
    the ended episode's windows: its final observation, ``next_obs``, is)."""
    next_obs, terminated, truncated = (
        np.asarray(next_obs),
        np.asarray(terminated, bool),
        np.asarray(truncated, bool),
    )
    obs = next_obs.copy()
    obs[terminated | truncated] = 99
    return VectorStep(next_obs, obs, np.asarray(reward, np.float32), terminated, truncated, [], [])


def _single_env(builder: SequenceBuilder, lengths, truncated=False, take_every=1) -> Sequences:
    """One env whose episode ``j`` ends after ``lengths[j]`` steps (the last one goes on after
    its ``lengths[-1]`` steps); at episode step ``u`` it sees
    obs ``10 j + u``, acts with state ``u`` (zeros at the start, as an actor resets it), takes
    action ``u + 1`` and gets reward ``u + 1``."""
    out, added = [], 0
    for j, length in enumerate(lengths):
        for u in range(length):
            end = u == length - 1 and j < len(lengths) - 1
            builder.add(
                np.array([[10 * j + u]], np.float32),
                np.full((1, *builder.state_shape), u, np.float32),
                np.array([u + 1]),
                _vstep([[10 * j + u + 1]], [u + 1], [end and not truncated], [end and truncated]),
            )
            added += 1
            if added % take_every == 0 and (batch := builder.take()) is not None:
                out.append(batch)
    if (batch := builder.take()) is not None:
        out.append(batch)
    return Sequences.concat(out)


@pytest.mark.parametrize("take_every", [1, 3, 100])
@pytest.mark.parametrize("truncated", [False, True])
def test_windows_by_hand_across_an_episode_end(truncated, take_every):
    # B 2, L 3, N 2 (T 7), period 2, gamma 0.5; an episode of 7 steps (final obs 7), then 5 steps
    builder = SequenceBuilder(
        1, burn_in=2, length=3, period=2, n_step=2, gamma=0.5, state_shape=(2, 1)
    )
    seq = _single_env(builder, [7, 5], truncated, take_every)
    # episode 0: windows at s = 0, 2, 4, 6; episode 1 (not ended): s = 0 only (its last index
    # s + L + N - 1 = 4 taken); nothing of episode 1 in a window of episode 0
    assert seq.obs[:, :, 0].tolist() == [
        [0, 0, 0, 1, 2, 3, 4],  # the burn-in is empty at the start: left padding
        [0, 1, 2, 3, 4, 5, 6],
        [2, 3, 4, 5, 6, 7, 0],  # 7: the final observation, stored and present
        [4, 5, 6, 7, 0, 0, 0],
        [0, 0, 10, 11, 12, 13, 14],
    ]
    assert seq.present.astype(int).tolist() == [
        [0, 0, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 0, 0, 0],
        [0, 0, 1, 1, 1, 1, 1],
    ]
    assert seq.action[2].tolist() == [3, 4, 5, 6, 7, 0, 0]  # no action at the final obs
    assert seq.reward[3].tolist() == [5, 6, 7, 0, 0, 0, 0]
    assert seq.burn.tolist() == [0, 2, 2, 2, 0]
    # the state before the first present index (episode steps 0, 0, 2, 4, 0), not after it
    assert seq.state[:, 0, 0].tolist() == [0, 0, 2, 4, 0]
    # what preceded it: action u and reward u at step u - 1; none at an episode's first step
    assert seq.first_prev_action.tolist() == [-1, -1, 2, 4, -1]
    assert seq.first_prev_reward.tolist() == [0, 0, 2, 4, 0]
    # ret = r_u + 0.5 r_{u+1} mid-episode; one reward at the last step; nothing past the end
    assert seq.ret.tolist() == [[2, 3.5, 5], [5, 6.5, 8], [8, 9.5, 7], [7, 0, 0], [2, 3.5, 5]]
    assert seq.offset.tolist() == [[2, 2, 2], [2, 2, 2], [2, 2, 1], [1, 0, 0], [2, 2, 2]]
    assert seq.mask.astype(int).tolist() == [[1, 1, 1]] * 3 + [[1, 0, 0], [1, 1, 1]]
    # a termination stops bootstrapping; a truncation bootstraps from the final obs (gamma^m)
    end = [0.25, 0.5] if truncated else [0.0, 0.0]
    assert seq.discount.tolist() == [
        [0.25] * 3,
        [0.25] * 3,
        [0.25, *end],
        [end[1], 0, 0],
        [0.25] * 3,
    ]
    # the bootstrap observation obs[B + i + offset] of the last real steps is the final one
    assert seq.obs[2, 2 + 2 + 1, 0] == 7 and seq.obs[3, 2 + 0 + 1, 0] == 7
    # each window's key: (stream, the env's episode count, s)
    assert seq.key.tolist() == [[0, 0, 0], [0, 0, 2], [0, 0, 4], [0, 0, 6], [0, 1, 0]]


def test_keys_name_each_envs_stream_and_episodes_and_go_on_across_a_restore():
    builder = SequenceBuilder(3, 1, 2, 1, 1, 0.9, (1, 1), stream=30)
    for t in range(6):  # env e's episodes end every e + 2 steps
        ends = np.array([(t + 1) % (e + 2) == 0 for e in range(3)])
        builder.add(
            np.zeros((3, 1)),
            np.zeros((3, 1, 1)),
            np.zeros(3),
            _vstep(np.zeros((3, 1)), np.zeros(3), ends, np.zeros(3, bool)),
        )
    key = builder.take().key
    assert key.dtype == np.int64 and set(key[:, 0].tolist()) == {30, 31, 32}
    for e, episodes in enumerate([3, 2, 1]):  # the episodes each env ended in 6 steps
        mine = key[key[:, 0] == 30 + e]
        assert mine[:, 1].max() == episodes - 1  # the next episodes are too short for a window
        assert (np.diff(mine[:, 1] * 100 + mine[:, 2]) > 0).all()  # an env's keys only grow
    saved = builder.state()
    assert saved["episode"] == [3, 2, 1]
    again = SequenceBuilder(3, 1, 2, 1, 1, 0.9, (1, 1), stream=30)
    again.restore(saved)
    assert again._episode.tolist() == [3, 2, 1]
    del saved["episode"]  # a state saved before keys were cut: counts from 0
    again.restore(saved)
    assert again._episode.tolist() == [0, 0, 0]


def test_the_stored_state_is_the_one_the_env_had_before_the_first_present_index():
    # period 1: a window at every step; state u before acting at step u (Acme once stored the
    # state after the step, u + 1)
    builder = SequenceBuilder(
        1, burn_in=3, length=2, period=1, n_step=1, gamma=0.9, state_shape=(2, 4)
    )
    seq = _single_env(builder, [9, 6])
    first = seq.burn_in - seq.burn
    first_obs = seq.obs[np.arange(len(seq)), first, 0] % 10  # the episode step of that index
    assert len(seq) == 9 + 4 and first_obs.tolist() == [0, 0, 0, 0, 1, 2, 3, 4, 5, 0, 0, 0, 0]
    np.testing.assert_array_equal(seq.state, np.broadcast_to(first_obs[:, None, None], (13, 2, 4)))
    assert not seq.state[first_obs == 0].any()  # zeros at an episode's first step


def test_several_envs_ending_at_different_steps_stay_apart():
    # env 0: episodes of 3 (terminated) then 4+; env 1: one episode of 5 (truncated); B 1, L 2,
    # N 1, period 2: obs 100 env + 10 episode + u
    builder = SequenceBuilder(
        2, burn_in=1, length=2, period=2, n_step=1, gamma=1.0, state_shape=(1, 1)
    )
    ends = {(0, 2): "term", (1, 4): "trunc"}
    out, u, episode = [], [0, 0], [0, 0]
    for k in range(7):
        obs = np.array([[100 * e + 10 * episode[e] + u[e]] for e in range(2)], np.uint8)
        ending = [ends.get((e, k)) for e in range(2)]
        builder.add(
            obs,
            np.array([[[u[0]]], [[u[1]]]], np.float32),
            np.array([7, 8]),
            _vstep(
                obs + 1, [1.0, 2.0], [x == "term" for x in ending], [x == "trunc" for x in ending]
            ),
        )
        for e in range(2):
            u[e], episode[e] = (0, episode[e] + 1) if ending[e] else (u[e] + 1, episode[e])
        if (batch := builder.take()) is not None:
            out.append(batch)
    seq = Sequences.concat(out)
    assert seq.obs.dtype == np.uint8  # observations keep their dtype
    # by the step that made them ready, windows completed before windows closed by an end:
    # (k 2) env 0 s 0 and env 1 s 0 complete, env 0's episode ends (s 2); (k 4) env 1 s 2
    # complete, its episode ends (s 4); (k 5) env 0's second episode, s 0 complete
    assert seq.obs[:, :, 0].tolist() == [
        [0, 0, 1, 2],
        [0, 100, 101, 102],
        [1, 2, 3, 0],  # 3: env 0's final observation
        [101, 102, 103, 104],
        [103, 104, 105, 0],
        [0, 10, 11, 12],
    ]
    assert seq.mask.astype(int).tolist() == [[1, 1], [1, 1], [1, 0], [1, 1], [1, 0], [1, 1]]
    # env 0 terminated: no bootstrap; env 1 truncated: it bootstraps from obs 105
    assert seq.discount.tolist() == [[1, 1], [1, 1], [0, 0], [1, 1], [1, 0], [1, 1]]
    assert seq.ret[:, 0].tolist() == [1, 2, 1, 2, 2, 1]
    assert seq.state[:, 0, 0].tolist() == [0, 0, 1, 1, 3, 0]


# -- random episodes against a reference written loop by loop -----------------------------------


@dataclass
class _Episode:
    """What one env saw in one episode: obs (the final one too, once ended), states, actions."""

    obs: list = field(default_factory=list)
    state: list = field(default_factory=list)
    action: list = field(default_factory=list)
    reward: list = field(default_factory=list)
    end: int | None = None  # its length, once ended
    terminated: bool = False


def _reference(ep: _Episode, B: int, L: int, N: int, period: int, gamma: float) -> dict:
    """The windows of ``ep`` ready so far, by their start, one index at a time."""
    T, taken = B + L + N, len(ep.action)
    out = {}
    for s in range(0, taken, period):
        if ep.end is None and s + L + N > taken:
            break
        w = {"burn": min(s, B), "obs": [], "action": [], "reward": [], "present": []}
        for t in range(T):
            u = s - B + t
            present = 0 <= u < len(ep.obs)
            w["present"].append(present)
            w["obs"].append(ep.obs[u] if present else np.zeros_like(ep.obs[0]))
            w["action"].append(ep.action[u] if 0 <= u < taken else 0)
            w["reward"].append(ep.reward[u] if 0 <= u < taken else 0.0)
        first = s - w["burn"]
        w["state"] = ep.state[first]
        w["first_prev"] = (ep.action[first - 1], ep.reward[first - 1]) if first else (-1, 0.0)
        w["ret"], w["discount"], w["offset"], w["mask"] = [], [], [], []
        for i in range(L):
            u = s + i
            m = 0 if u >= taken else min(N, taken - u) if ep.end is not None else N
            stop = ep.terminated and ep.end is not None and u + m == ep.end
            w["ret"].append(sum(gamma**k * ep.reward[u + k] for k in range(m)))
            w["discount"].append(0.0 if m == 0 or stop else gamma**m)
            w["offset"].append(m)
            w["mask"].append(m > 0)
        out[s] = w
    return out


def _random_run(rng, n_envs, steps, B, L, period, N, gamma, builder=None, cut=None):
    """Step ``n_envs`` envs ``steps`` times (episodes of random lengths, ended by termination or
    truncation); take at random. Returns the builder's output and every episode seen; with ``cut``
    the builder is saved after step ``cut`` and a new one restored from it goes on."""
    builder = builder or SequenceBuilder(n_envs, B, L, period, N, gamma, (1, 3))
    episodes = [[_Episode()] for _ in range(n_envs)]
    out = []
    for k in range(steps):
        obs, state, next_obs = [], [], []
        ends = rng.random(n_envs) < 0.12
        term = ends & (rng.random(n_envs) < 0.5)
        for e in range(n_envs):
            ep, j = episodes[e][-1], len(episodes[e]) - 1
            u = len(ep.action)
            obs.append([e, j, u])
            state.append([[u, j, e + 0.5]])
            next_obs.append([e, j, u + 1])
        action = rng.integers(0, 4, n_envs)
        reward = rng.normal(size=n_envs).astype(np.float32)
        obs_a, next_a = np.array(obs, np.float32), np.array(next_obs, np.float32)
        builder.add(obs_a, np.array(state), action, _vstep(next_a, reward, term, ends & ~term))
        for e in range(n_envs):
            ep = episodes[e][-1]
            ep.obs.append(obs_a[e])
            ep.state.append(np.array(state[e], np.float32))
            ep.action.append(int(action[e]))
            ep.reward.append(float(reward[e]))
            if ends[e]:
                ep.obs.append(next_a[e])
                ep.end, ep.terminated = len(ep.action), bool(term[e])
                episodes[e].append(_Episode())
        if rng.random() < 0.3 and (batch := builder.take()) is not None:
            out.append(batch)
            assert len(builder._obs) <= B + L + N  # the rows a pending window still reaches
        if k == cut:
            if (batch := builder.take()) is not None:
                out.append(batch)
            saved = io.BytesIO()
            torch.save(builder.state(), saved)
            saved.seek(0)
            builder = SequenceBuilder(n_envs, B, L, period, N, gamma, (1, 3))
            builder.restore(torch.load(saved, weights_only=True))  # a checkpoint reads it back
    if (batch := builder.take()) is not None:
        out.append(batch)
    return (Sequences.concat(out) if out else None), episodes


SETTINGS = [  # (n_envs, B, L, period, N)
    (1, 0, 1, 1, 1),
    (1, 2, 3, 3, 2),
    (2, 3, 4, 2, 3),
    (3, 1, 5, 5, 1),
    (2, 4, 2, 1, 4),
    (3, 0, 6, 4, 2),
]


@pytest.mark.parametrize("n_envs,B,L,period,N", SETTINGS)
@pytest.mark.parametrize("seed", [0, 1])
def test_random_episodes_match_the_reference_and_every_step_is_learned(
    seed, n_envs, B, L, period, N
):
    gamma = 0.9
    seq, episodes = _random_run(np.random.default_rng(seed), n_envs, 150, B, L, period, N, gamma)
    first = seq.burn_in - seq.burn
    heads = seq.obs[np.arange(len(seq)), first].astype(int)  # [env, episode, u] of the first index
    got = {}
    for row, (e, j, u) in enumerate(heads):
        present = seq.obs[row][seq.present[row]]
        assert (present[:, :2] == [e, j]).all()  # one episode of one env, never two
        got[(e, j, u + seq.burn[row])] = row
    want = {
        (e, j, s): w
        for e, eps in enumerate(episodes)
        for j, ep in enumerate(eps)
        for s, w in _reference(ep, B, L, N, period, gamma).items()
    }
    assert sorted(got) == sorted(want)
    for key, w in want.items():
        row = got[key]
        np.testing.assert_array_equal(seq.obs[row], np.array(w["obs"]))
        for name in ("action", "reward", "present", "burn", "offset", "mask"):
            np.testing.assert_array_equal(getattr(seq, name)[row], w[name], err_msg=name)
        np.testing.assert_array_equal(seq.state[row], w["state"])
        assert (seq.first_prev_action[row], seq.first_prev_reward[row]) == w["first_prev"]
        np.testing.assert_allclose(seq.ret[row], w["ret"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(seq.discount[row], w["discount"], rtol=1e-6)
    for e, eps in enumerate(episodes):  # every step of an ended episode is learned
        for j, ep in enumerate(eps):
            if ep.end is None:
                continue
            learned = set()
            for s in range(0, ep.end, period):
                row = got[(e, j, s)]
                learned |= {s + i for i in np.flatnonzero(seq.mask[row])}
            assert learned == set(range(ep.end)), (e, j)


def test_real_envs_with_time_limits_match_the_reference():
    # CartPole: terminations (the pole falls) and truncations (9 and 60 steps), same-step resets
    envs = [gym.make("CartPole-v1", max_episode_steps=limit) for limit in (9, 60)]
    vector = VectorEnv(envs, seed=3)
    B_, L_, period, N_ = 2, 4, 2, 3
    builder = SequenceBuilder(2, B_, L_, period, N_, 0.9, (2, 3))
    episodes = [[_Episode()], [_Episode()]]
    rng, out = np.random.default_rng(0), []
    for _ in range(150):
        obs, action = vector.obs, rng.integers(0, 2, 2)
        state = rng.normal(size=(2, 2, 3)).astype(np.float32)
        step = vector.step(action)
        builder.add(obs, state, action, step)
        for e in range(2):
            ep = episodes[e][-1]
            ep.obs.append(obs[e])
            ep.state.append(state[e])
            ep.action.append(int(action[e]))
            ep.reward.append(float(step.reward[e]))
            if step.terminated[e] or step.truncated[e]:
                ep.obs.append(step.next_obs[e])
                ep.end, ep.terminated = len(ep.action), bool(step.terminated[e])
                episodes[e].append(_Episode())
        if (batch := builder.take()) is not None:
            out.append(batch)
    seq = Sequences.concat(out)
    want = [
        w
        for eps in episodes
        for ep in eps
        for w in _reference(ep, B_, L_, N_, period, 0.9).values()
    ]
    ended = [ep for eps in episodes for ep in eps if ep.end is not None]
    assert len(seq) == len(want) and {ep.terminated for ep in ended} == {False, True}
    # the random state at a window's first present index and its burn-in name the window
    rows = {(seq.state[r].tobytes(), seq.burn[r]): r for r in range(len(seq))}
    assert len(rows) == len(seq)
    for w in want:
        r = rows[(np.asarray(w["state"]).tobytes(), w["burn"])]
        np.testing.assert_array_equal(seq.obs[r], np.array(w["obs"]))
        np.testing.assert_array_equal(seq.mask[r], w["mask"])
        np.testing.assert_allclose(seq.ret[r], w["ret"], rtol=1e-6)
        np.testing.assert_allclose(seq.discount[r], w["discount"], rtol=1e-6)


@pytest.mark.parametrize("cut", [0, 7, 40, 88])
def test_a_builder_restored_mid_episode_emits_what_the_uninterrupted_one_does(cut):
    args = (3, 120, 3, 4, 2, 3, 0.95)  # n_envs, steps, B, L, period, N, gamma
    whole, _ = _random_run(np.random.default_rng(5), *args)
    resumed, _ = _random_run(np.random.default_rng(5), *args, cut=cut)
    for name in (*STORED_SEQUENCE, "key"):
        np.testing.assert_array_equal(getattr(resumed, name), getattr(whole, name), err_msg=name)


def test_state_refuses_untaken_sequences_and_restore_refuses_other_settings():
    builder = SequenceBuilder(
        1, burn_in=0, length=1, period=1, n_step=1, gamma=0.5, state_shape=(1, 2)
    )
    for _ in range(2):  # the window at step 0 is ready once step 1 (its bootstrap) is taken
        builder.add(
            np.zeros((1, 3)),
            np.zeros((1, 1, 2)),
            [0],
            _vstep(np.ones((1, 3)), [1.0], [False], [False]),
        )
    with pytest.raises(RuntimeError, match="take"):
        builder.state()
    builder.take()
    saved = builder.state()
    for other in (
        SequenceBuilder(1, burn_in=1, length=1, period=1, n_step=1, gamma=0.5, state_shape=(1, 2)),
        SequenceBuilder(2, burn_in=0, length=1, period=1, n_step=1, gamma=0.5, state_shape=(1, 2)),
    ):
        with pytest.raises(ValueError, match="cut with"):
            other.restore(saved)
    with pytest.raises(ValueError, match=r"do not fit 1 envs with recurrent states \(2, 2\)"):
        SequenceBuilder(1, 0, 1, 1, 1, 0.5, (2, 2)).restore(saved)
    # a crafted checkpoint: objects (pickles), names numpy does not know, rows that disagree
    for column, change, match in [
        ("obs", {"dtype": "|O"}, "dtype '|O' and shape .* only numeric arrays"),
        ("obs", {"dtype": "no-such-type"}, "only numeric arrays"),
        ("obs", {"shape": [-1, 1, 3]}, r"shape \[-1, 1, 3\]: only numeric"),
        ("action", {"shape": [1, 1], "data": saved["rows"]["action"]["data"][:8]}, "do not fit"),
        ("reward", {"data": b"\0" * 3}, "buffer size must be a multiple"),
    ]:
        crafted = {**saved, "rows": {**saved["rows"], column: saved["rows"][column] | change}}
        with pytest.raises(ValueError, match=match):
            SequenceBuilder(1, 0, 1, 1, 1, 0.5, (1, 2)).restore(crafted)
    with pytest.raises(ValueError, match=r"state of shape \(1, 2\), expected \(1, 1, 2\)"):
        builder.add(
            np.zeros((1, 3)),
            np.zeros((1, 2)),
            [0],
            _vstep(np.ones((1, 3)), [1.0], [False], [False]),
        )


@pytest.mark.parametrize(
    "args,match",
    [
        ((0, 0, 1, 1, 1, 0.9), "n_envs >= 1"),
        ((1, -1, 1, 1, 1, 0.9), "burn_in >= 0"),
        ((1, 0, 4, 5, 1, 0.9), r"period must be in \[1, length=4\]"),
        ((1, 0, 4, 0, 1, 0.9), "period"),
        ((1, 0, 4, 2, 0, 0.9), "n_step >= 1"),
        ((1, 0, 4, 2, 1, 1.5), "gamma"),
    ],
)
def test_settings_out_of_range_are_refused(args, match):
    with pytest.raises(ValueError, match=match):
        SequenceBuilder(*args, state_shape=(1, 1))
