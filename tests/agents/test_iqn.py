"""IQN (Dabney et al. 2018) and the dueling / CNN value networks: pieces on hand-checked numbers,
then real training on CartPole-v1 in both trainers, resume and ``border eval``."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py import train
from border_py.agents.dqn import DQN
from border_py.agents.iqn import IQN, midpoints, quantile_huber_loss
from border_py.agents.networks import DuelingHead, NatureCNN, QuantileNetwork, q_network
from border_py.errors import ConfigError
from border_py.replay.prioritized import PrioritizedReplayBuffer
from border_py.trainers.components import check_buffer_fits
from border_py.trainers.loop import learn_step
from border_py.transitions import Transitions

from ..conftest import FEW_FRESH_EVALS, make_config, run_border, scalar_tags

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


BOX, TWO = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2)
PIXELS = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)


def _batch(n: int = 4, seed: int = 0) -> Transitions:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 3)).astype(np.float32)
    return Transitions(
        obs,
        rng.integers(0, 2, n),
        rng.normal(size=n).astype(np.float32),
        rng.normal(size=(n, 3)).astype(np.float32),
        np.resize(np.array([0.9, 0.0, 0.9, 0.81], np.float32), n),  # one terminal in four
    )


# -- dueling and CNN ---------------------------------------------------------------------------


def test_dueling_aggregation_by_hand():
    head = DuelingHead(2, [], 3)
    with torch.no_grad():
        head.value[0].weight.copy_(torch.tensor([[1.0, 0.0]]))
        head.value[0].bias.fill_(0.5)
        head.advantage[0].weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        head.advantage[0].bias.zero_()
    q = head(torch.tensor([[2.0, 4.0]]))
    # V = 2 + 0.5 = 2.5; A = [2, 4, 6], mean 4; Q = V + A - mean A = [0.5, 2.5, 4.5]
    assert q.tolist() == [pytest.approx([0.5, 2.5, 4.5])]
    # the advantages of Q's decomposition sum to zero: mean_a Q = V
    assert float(q.detach().mean()) == pytest.approx(2.5)


def test_dueling_splits_the_last_hidden_layer_and_plain_mlp_keeps_its_keys():
    plain = q_network(BOX, 2, [8, 8])
    assert [k for k in plain.state_dict() if k.endswith("weight")] == [
        "1.weight",
        "3.weight",
        "5.weight",
    ]
    dueling = q_network(BOX, 2, [8, 8], dueling=True)
    shapes = {k: tuple(v.shape) for k, v in dueling.state_dict().items() if k.endswith("weight")}
    assert shapes == {
        "1.weight": (8, 3),  # shared layer
        "3.value.0.weight": (8, 8),
        "3.value.2.weight": (1, 8),
        "3.advantage.0.weight": (8, 8),
        "3.advantage.2.weight": (2, 8),
    }


def test_nature_cnn_shapes_and_pixel_scaling():
    net = q_network(PIXELS, 6, [512])
    assert isinstance(net[0], NatureCNN)
    assert net[1].in_features == 64 * 7 * 7  # 84 -> 20 -> 9 -> 7
    pixels = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    out = net(pixels)
    assert out.shape == (2, 6)
    # uint8 input is scaled by 1/255 inside forward: same as feeding the scaled floats unscaled
    torch.testing.assert_close(net[0](pixels), net[0].conv(pixels.float() / 255))
    dueling = q_network(PIXELS, 6, [512], dueling=True)
    assert tuple(dueling[1].value[0].weight.shape) == (512, 3136)
    with pytest.raises(ConfigError, match=r"network='cnn'"):
        q_network(BOX, 2, [8], network="cnn")
    with pytest.raises(ConfigError, match=r"network='conv'"):
        q_network(BOX, 2, [8], network="conv")


def test_dueling_dqn_trains_on_a_fixed_batch():
    agent = DQN(BOX, TWO, hidden_sizes=[16, 16], dueling=True, lr=1e-2, loss="mse", tau=0.01)
    batch = _batch(8)
    first = float(agent.update(batch)["train/loss"])
    for _ in range(150):
        last = float(agent.update(batch)["train/loss"])
    assert last < first / 4


# -- IQN pieces --------------------------------------------------------------------------------


def test_quantile_huber_loss_by_hand():
    # one sample, N = 2 levels (0.25, 0.75), N' = 2 targets; kappa = 1
    taus = torch.tensor([[0.25, 0.75]])
    delta = torch.tensor([[[0.5, -2.0], [2.0, -0.5]]])  # delta_ij = target_j - Z_{tau_i}
    # rho_tau(u) = |tau - 1{u<0}| * huber(u): huber(0.5)=0.125, huber(-2)=1.5, huber(2)=1.5, huber(-0.5)=0.125
    # i=0 (tau .25): 0.25*0.125 + 0.75*1.5 = 1.15625; i=1 (tau .75): 0.75*1.5 + 0.25*0.125 = 1.15625
    # sum over i of the mean over j: 1.15625 / 2 * 2 = 1.15625
    loss = quantile_huber_loss(delta, taus, kappa=1.0)
    assert loss.tolist() == pytest.approx([1.15625])
    # kappa = 2: huber_2(2) = 0.5 * 4 = 2, huber_2(-2) = 2, divided by kappa
    # i=0: (0.25*0.125 + 0.75*2) / 2 = 0.765625; i=1: (0.75*2 + 0.25*0.125) / 2 = 0.765625
    assert quantile_huber_loss(delta, taus, kappa=2.0).tolist() == pytest.approx([0.765625])


def test_quantile_loss_minimizer_is_the_quantile():
    """Minimizing the loss over a constant prediction gives the tau-quantile of the targets."""
    targets = torch.arange(1.0, 11.0)  # 1..10
    pred = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([pred], lr=0.05)
    for _ in range(3000):
        delta = (targets - pred).view(1, 1, -1)
        loss = quantile_huber_loss(delta, torch.tensor([[0.9]]), kappa=0.01).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert 9.0 <= float(pred.detach()) <= 10.0  # the 0.9-quantile of 1..10


def test_cosine_embedding_shape_and_values():
    net = QuantileNetwork(BOX, 2, [8, 5], n_cos=4)  # torso: the 8-unit layer; f: 5 units, 2 outputs
    with torch.no_grad():  # unit j < 4 reads cosine j alone: phi_j(tau) = ReLU(cos(pi j tau))
        net.phi[0].weight.copy_(torch.eye(8, 4))
        net.phi[0].bias.zero_()
    tau = 1 / 3
    emb = net.embed(torch.tensor([[tau, 0.5]]))
    assert emb.shape == (1, 2, 8)  # (B, N, width of the torso's output)
    # i = 0..n-1 as in eq. 4: cos(0) = 1, cos(pi/3) = 0.5, cos(2 pi/3) = -0.5 -> 0, cos(pi) = -1 -> 0
    assert emb[0, 0].tolist() == pytest.approx([1.0, 0.5, 0.0, 0.0, 0, 0, 0, 0], abs=1e-6)
    assert emb[0, 1].tolist() == pytest.approx([1.0, 0.0, 0.0, 0.0, 0, 0, 0, 0], abs=1e-6)
    out = net(torch.zeros(3, 3), torch.rand(3, 7))
    assert out.shape == (3, 7, 2)  # (B, N, actions)


def test_iqn_acts_by_the_mean_over_k_levels():
    agent = IQN(
        BOX, gym.spaces.Discrete(3), hidden_sizes=[16, 16], k=5, eps_start=0.0, eps_final=0.0
    )
    obs = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    state = agent.tau_rng.get_state()
    actions = agent.act(obs, explore=True)
    agent.tau_rng.set_state(state)  # the same K levels, drawn again
    taus = torch.rand(6, 5, generator=agent.tau_rng)
    with torch.no_grad():
        z = agent.z(torch.tensor(obs), taus)  # (6, 5, 3)
    np.testing.assert_array_equal(actions, z.mean(dim=1).argmax(dim=1).numpy())
    assert agent.env_steps == 6
    # greedy acting: the K midpoints (k + 0.5) / K, no randomness
    greedy = agent.act(obs, explore=False)
    assert midpoints(5, torch.device("cpu")).tolist() == pytest.approx([0.1, 0.3, 0.5, 0.7, 0.9])
    with torch.no_grad():
        z = agent.z(torch.tensor(obs), midpoints(5, torch.device("cpu")).expand(6, 5))
    np.testing.assert_array_equal(greedy, z.mean(dim=1).argmax(dim=1).numpy())
    np.testing.assert_array_equal(greedy, agent.act(obs, explore=False))
    assert agent.env_steps == 6


def test_iqn_update_loss_by_hand_weights_once_and_reports_td_errors():
    agent = IQN(BOX, TWO, hidden_sizes=[8, 8], n_tau=3, n_tau_prime=4, k=2, max_grad_norm=None)
    batch = _batch(4)
    state = agent.tau_rng.get_state()
    with torch.no_grad():  # the loss by hand, with the levels update() will draw
        taus_k, taus_p, taus = (torch.rand(4, n, generator=agent.tau_rng) for n in (2, 4, 3))
        obs, next_obs = torch.tensor(batch.obs), torch.tensor(batch.next_obs)
        best = agent.z_target(next_obs, taus_k).mean(1).argmax(1)
        next_z = agent.z_target(next_obs, taus_p)[torch.arange(4), :, best]  # (4, N')
        target = (
            torch.tensor(batch.reward)[:, None] + torch.tensor(batch.discount)[:, None] * next_z
        )
        z = agent.z(obs, taus)[torch.arange(4), :, torch.tensor(batch.action)]  # (4, N)
        per_sample = torch.zeros(4)
        for b in range(4):
            for i in range(3):
                for j in range(4):
                    u = float(target[b, j] - z[b, i])
                    huber = 0.5 * u * u if abs(u) <= 1 else abs(u) - 0.5
                    per_sample[b] += abs(float(taus[b, i]) - (u < 0)) * huber / 4
    weight = np.array([1.0, 0.5, 0.25, 0.0], np.float32)
    batch.weight = weight
    agent.tau_rng.set_state(state)
    metrics = agent.update(batch)
    assert float(metrics["train/loss"]) == pytest.approx(
        float((per_sample * torch.from_numpy(weight)).mean()), rel=1e-5
    )
    td = metrics["td_error"]
    assert td.dtype == np.float32 and td.shape == (4,) and (td >= 0).all()
    np.testing.assert_allclose(td, per_sample.numpy(), rtol=1e-5)
    assert float(metrics["train/q_mean"]) == pytest.approx(float(z.mean()), rel=1e-5)


def test_iqn_td_error_changes_nothing_and_is_deterministic():
    agent = IQN(BOX, TWO, hidden_sizes=[8, 8], n_tau=4, n_tau_prime=4, k=4)
    batch = _batch(4)
    rng_state, params = agent.tau_rng.get_state(), [p.clone() for p in agent.z.parameters()]
    first = agent.td_error(batch)
    assert first.shape == (4,) and first.dtype == np.float32 and (first >= 0).all()
    np.testing.assert_array_equal(first, agent.td_error(batch))
    assert torch.equal(rng_state, agent.tau_rng.get_state())
    assert all(torch.equal(a, b) for a, b in zip(params, agent.z.parameters(), strict=True))


def test_iqn_drives_prioritized_replay():
    agent = IQN(BOX, TWO, hidden_sizes=[8, 8], n_tau=4, n_tau_prime=4, k=4, batch_size=8)
    buffer = PrioritizedReplayBuffer(capacity=32, seed=0, alpha=1.0, eps=1e-3)
    check_buffer_fits(buffer, agent, BOX)  # IQN declares that it reports TD errors
    buffer.push(_batch(32, seed=1))
    sampled = buffer.sample(8)
    expected = agent.update(sampled)["td_error"] + 1e-3  # priorities are (|td| + eps) ** 1
    buffer.update_priorities(sampled.index, expected - 1e-3)
    np.testing.assert_allclose(buffer.priorities()[sampled.index], expected, rtol=1e-6)
    metrics = learn_step(agent, buffer)  # the trainers' path: td_error feeds the buffer
    assert "td_error" not in metrics and np.isfinite(float(metrics["train/loss"]))


def test_iqn_state_dict_round_trip_and_hard_target_copy():
    agent = IQN(BOX, TWO, hidden_sizes=[8, 8], target_update_interval=2)
    batch = _batch(4)
    agent.update(batch)
    assert not all(
        torch.equal(a, b)
        for a, b in zip(agent.z.parameters(), agent.z_target.parameters(), strict=True)
    )
    agent.update(batch)  # second opt step: hard copy
    assert all(
        torch.equal(a, b)
        for a, b in zip(agent.z.parameters(), agent.z_target.parameters(), strict=True)
    )
    state = agent.state_dict()
    other = IQN(BOX, TWO, hidden_sizes=[8, 8], target_update_interval=2, seed=5)
    other.load_state_dict(state)
    assert float(agent.update(batch)["train/loss"]) == pytest.approx(
        float(other.update(batch)["train/loss"])
    )


def test_iqn_bad_keys_are_one_line():
    with pytest.raises(ConfigError, match=r"^n_tau_prime=0: must be a positive int$"):
        IQN(BOX, TWO, n_tau_prime=0)
    with pytest.raises(ConfigError, match=r"^kappa=-1"):
        IQN(BOX, TWO, kappa=-1)
    with pytest.raises(ConfigError, match=r"^hidden_sizes=\[\]"):
        IQN(BOX, TWO, hidden_sizes=[])
    with pytest.raises(ConfigError, match="Discrete"):
        IQN(BOX, gym.spaces.Box(-1, 1, (1,)))


def test_iqn_on_pixels_uses_the_nature_cnn():
    agent = IQN(PIXELS, gym.spaces.Discrete(6), hidden_sizes=[512], n_tau=4, n_tau_prime=4, k=4)
    assert isinstance(agent.z.psi[0], NatureCNN)
    assert agent.z.phi[0].out_features == 3136  # the embedding has the conv features' width
    obs = np.zeros((2, 4, 84, 84), np.uint8)
    assert agent.act(obs, explore=False).shape == (2,)
    batch = Transitions(obs, np.array([0, 5]), np.ones(2, np.float32), obs, np.ones(2, np.float32))
    assert np.isfinite(float(agent.update(batch)["train/loss"]))


# -- real training, resume, border eval ----------------------------------------------------------


@pytest.mark.slow
def test_serial_iqn_solves_cartpole(tmp_path):
    cfg = make_config(
        tmp_path, "experiment=iqn_cartpole", "trainer=serial", "seed=0", FEW_FRESH_EVALS
    )
    summary = train(cfg)
    assert summary["best_return"] >= 475, summary
    assert summary["solved_at"] is not None
    tags = scalar_tags(tmp_path / "run")
    assert max(v for _, v in tags["eval/return_mean"]) == pytest.approx(summary["best_return"])
    assert {"train/loss", "train/q_mean", "train/epsilon"} <= set(tags)


@pytest.mark.slow
def test_async_iqn_solves_cartpole(tmp_path):
    cfg = make_config(
        tmp_path, "experiment=iqn_cartpole", "actor_manager.n_actors=2", "seed=0", FEW_FRESH_EVALS
    )
    summary = train(cfg)
    assert summary["best_return"] >= 475, summary
    assert summary["accounting"]["sent"] == summary["accounting"]["received"]


SHORT_SERIAL = [
    "agent=iqn",
    "trainer=serial",
    "agent.hidden_sizes=[32,32]",
    "agent.n_tau=8",
    "agent.n_tau_prime=8",
    "agent.k=8",
    "trainer.warmup_period=200",
    "trainer.eval_interval=150",
    "trainer.eval_episodes=2",
    "trainer.record_interval=50",
    "trainer.save_interval=150",
    "trainer.save_replay_buffer=true",
    FEW_FRESH_EVALS,
]


@pytest.mark.slow
def test_iqn_serial_resume_is_exact_and_border_eval_works(tmp_path):
    full, part = tmp_path / "full", tmp_path / "part"
    train(make_config(full, *SHORT_SERIAL, "trainer.max_opts=300"))
    train(make_config(part, *SHORT_SERIAL, "trainer.max_opts=150"))
    resumed = train(
        make_config(part, "resume=" + str(part / "run")), overrides=["trainer.max_opts=300"]
    )
    assert resumed["opt_steps"] == 300
    a, b = scalar_tags(full / "run"), scalar_tags(part / "run")
    for tag in ("train/loss", "train/q_mean", "eval/return_mean", "train/epsilon"):
        assert [s for s, _ in a[tag]] == [s for s, _ in b[tag]], tag
        np.testing.assert_array_equal([v for _, v in a[tag]], [v for _, v in b[tag]], err_msg=tag)
    agent_state = torch.load(
        part / "run" / "checkpoints" / "000000300" / "agent.pt", weights_only=True
    )
    assert {"z", "z_target", "optimizer", "tau_rng", "rng"} <= set(agent_state)

    out = run_border(["eval", str(part / "run"), "eval.n_episodes=3"], tmp_path)
    assert out.returncode == 0, out.stderr
    (written,) = (part / "run" / "checkpoints" / "best").glob("eval_*.json")
    record = json.loads(written.read_text())
    assert len(record["episode_returns"]) == 3
    assert record["result"]["eval/return_mean"] == pytest.approx(np.mean(record["episode_returns"]))
