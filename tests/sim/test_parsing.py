"""Request bodies -> `Parsed`: the simulator accepts `top_k` on every API and checks it
as SGLang does (it does not model its effect)."""

from __future__ import annotations

import pytest

from autospec.sim.parsing import ApiError, parse_chat, parse_completions, parse_generate


def _parse(api: str, top_k: object | None):
    extra = {} if top_k is None else {"top_k": top_k}
    if api == "generate":
        return parse_generate({"text": "a b c", "sampling_params": {"max_new_tokens": 4, **extra}}, "sim")
    if api == "completions":
        return parse_completions({"prompt": "a b c", "max_tokens": 4, **extra}, "sim")
    return parse_chat({"messages": [{"role": "user", "content": "a b c"}], "max_tokens": 4, **extra}, "sim", 4096)


@pytest.mark.parametrize("api", ["generate", "completions", "chat"])
def test_top_k_is_accepted_on_every_api(api: str) -> None:
    assert _parse(api, 4).top_k == 4
    assert _parse(api, None).top_k == -1  # SGLang's default: every token
    assert _parse(api, -1).top_k == -1


@pytest.mark.parametrize("api", ["generate", "completions", "chat"])
@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "top_k must be -1 (disable) or at least 1, got 0."),
        (-3, "top_k must be -1 (disable) or at least 1, got -3."),
        ("4", "top_k must be an integer, got '4'"),
    ],
)
def test_a_bad_top_k_is_a_400_in_sglangs_words(api: str, value: object, message: str) -> None:
    with pytest.raises(ApiError) as exc:
        _parse(api, value)
    assert exc.value.status == 400 and str(exc.value) == message
