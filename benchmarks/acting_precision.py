"""What acting in bfloat16 (``actor_manager.policy_dtype=bfloat16``) changes, on a trained policy.

Loads a trained DQN with a CNN torso (a run dir or a checkpoint dir) twice: one copy acts in
float32 (the network as trained), the other in bfloat16
(:class:`border_py.agents.inference.ConvInference`). Then:

1. **The same states**: the float32 copy plays ``--episodes`` greedy episodes of the run's
   evaluation env; on every state it visits both copies give their Q-values. Printed: the share of
   states where the greedy actions agree, the largest and the median difference of the
   Q-values relative to the largest |Q| of the state, and the agreement on the states whose two
   best float32 values differ by more than 1% of the largest |Q| (where bfloat16's rounding
   cannot reorder them).
2. **The returns**: each copy plays ``--episodes`` greedy episodes from the same reset seeds;
   their mean returns with standard errors (bfloat16 changes actions only where values tie
   closely; a changed action changes the rest of its episode).
3. **The speed**: microseconds per observation of a forward pass at ``--batch`` rows (an actor's
   vector step), float32 module against bfloat16, torch at one thread as in an actor; best of 5.

Ends with ``RESULT {json}``.

    python benchmarks/acting_precision.py --checkpoint /path/to/run [--episodes 100] [--batch 16]
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch

from border_py.agents.dqn import DQN
from border_py.deploy.load import load_policy


def greedy_episode(env: gym.Env, agent: DQN, seed: int, other: DQN | None) -> tuple[float, list]:
    """One greedy episode of ``agent`` on ``env`` from reset seed ``seed``: its return and, with
    ``other``, each state's Q-values from both agents."""
    obs, _ = env.reset(seed=seed)
    total, pairs, done = 0.0, [], False
    while not done:
        batch = np.asarray(obs)[None]
        q = agent.q_values(batch)
        if other is not None:
            pairs.append((q[0], other.q_values(batch)[0]))
        obs, reward, terminated, truncated, _ = env.step(int(q[0].argmax()))
        total += float(reward)
        done = terminated or truncated
    return total, pairs


def forward_time(agent: DQN, obs: np.ndarray, calls: int = 200) -> float:
    """Best mean microseconds per observation of ``agent.q_values`` over 5 runs of ``calls``."""
    best = float("inf")
    for _ in range(5):
        agent.q_values(obs)
        start = time.perf_counter()
        for _ in range(calls):
            agent.q_values(obs)
        best = min(best, (time.perf_counter() - start) / calls)
    return 1e6 * best / len(obs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a run dir or checkpoint dir (DQN)")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(1)

    policy = load_policy(args.checkpoint)
    fp32, bf16 = policy.agent, load_policy(args.checkpoint).agent
    if not isinstance(fp32, DQN) or not isinstance(bf16, DQN):
        raise SystemExit(f"{policy.agent_name}: this benchmark takes a DQN checkpoint")
    if "bfloat16" not in bf16.acting_dtypes():
        raise SystemExit("this DQN's network has no CNN torso: it acts in float32 only")
    bf16.set_acting_dtype("bfloat16")

    seeds = [10_000 + i for i in range(args.episodes)]
    env = policy.make_env()  # one env: each episode starts from its own reset seed
    returns32, pairs = [], []
    for seed in seeds:
        total, visited = greedy_episode(env, fp32, seed, bf16)
        returns32.append(total)
        pairs += visited
    returns16 = [greedy_episode(env, bf16, seed, None)[0] for seed in seeds]
    env.close()

    q32 = np.stack([a for a, _ in pairs])
    q16 = np.stack([b for _, b in pairs])
    top = np.abs(q32).max(axis=1)
    rel = np.abs(q16 - q32).max(axis=1) / top
    agree = q32.argmax(axis=1) == q16.argmax(axis=1)
    ordered = np.sort(q32, axis=1)
    clear = (ordered[:, -1] - ordered[:, -2]) > 0.01 * top

    obs = np.stack([policy.observation_space.sample() for _ in range(args.batch)])
    us32, us16 = forward_time(fp32, obs), forward_time(bf16, obs)

    def mean_se(values: list[float]) -> tuple[float, float]:
        return float(np.mean(values)), float(np.std(values, ddof=1) / np.sqrt(len(values)))

    (m32, se32), (m16, se16) = mean_se(returns32), mean_se(returns16)
    print(f"{policy.env_id}, {policy.checkpoint}, {len(pairs)} states of {args.episodes} episodes")
    print(f"  greedy actions agree: {agree.mean():.4f} of states ({clear.mean():.3f} of them have")
    print(f"    a clear best action: agreement there {agree[clear].mean():.4f})")
    print(f"  |Q bf16 - Q fp32| / max|Q|: median {np.median(rel):.2e}, max {rel.max():.2e}")
    print(f"  return fp32 {m32:.2f} +- {se32:.2f}, bf16 {m16:.2f} +- {se16:.2f} (mean +- s.e.)")
    print(f"  us per observation at {args.batch} rows: fp32 {us32:.1f}, bf16 {us16:.1f}")
    result = {
        "env_id": policy.env_id,
        "states": len(pairs),
        "action_agreement": round(float(agree.mean()), 5),
        "action_agreement_clear_best": round(float(agree[clear].mean()), 5),
        "q_rel_diff_median": float(np.median(rel)),
        "q_rel_diff_max": float(rel.max()),
        "return_fp32": round(m32, 3),
        "return_fp32_se": round(se32, 3),
        "return_bf16": round(m16, 3),
        "return_bf16_se": round(se16, 3),
        "speedup_bf16_vs_fp32": round(us32 / us16, 3),
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
