"""Validates an `onebash export` file with each format's own checks.

Usage: python export_validate.py FORMAT FILE; exits 1 naming the first
line that fails, 0 when every line passes. tests/it/export.rs runs it with
the python that .ci/run installs harbor and openai into.

- atif: Harbor's own validator (harbor.utils.trajectory_validator, the
  pydantic models of ATIF) on each line.
- openai-chat: the checks of OpenAI's format-validation recipe for chat
  fine-tuning data (keys, roles, content, an assistant message), extended
  as the fine-tuning guide extends the format for tools (`tool_calls`,
  `tool` messages with `tool_call_id`, `tools`, `parallel_tool_calls`),
  plus the openai SDK's own message and tool types checked by pydantic.
- sharegpt: the rules LLaMA-Factory's sharegpt converter applies (tags,
  alternation, even length, `tools` and `function_call` values that parse
  as JSON), since the trainer itself needs torch to import.
"""

import json
import sys


def atif(example):
    from harbor.utils.trajectory_validator import TrajectoryValidator

    validator = TrajectoryValidator()
    if not validator.validate(example, validate_images=False):
        return "; ".join(validator.get_errors())
    return None


def openai_chat(example):
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
    from pydantic import TypeAdapter

    if set(example) - {"messages", "tools", "parallel_tool_calls"}:
        return f"unrecognized keys {sorted(set(example))}"
    messages = example.get("messages")
    if not isinstance(messages, list) or not messages:
        return "missing_messages_list"
    answered = set()
    called = set()
    for message in messages:
        if "role" not in message:
            return "message_missing_key"
        allowed = ("role", "content", "name", "function_call", "weight", "tool_calls", "tool_call_id")
        if any(key not in allowed for key in message):
            return f"message_unrecognized_key: {sorted(message)}"
        role = message["role"]
        if role not in ("system", "user", "assistant", "tool"):
            return f"unrecognized_role: {role}"
        content = message.get("content")
        calls = message.get("tool_calls")
        if not (content or calls) or (content is not None and not isinstance(content, str)):
            return f"missing_content: {message}"
        if role == "tool":
            answered.add(message.get("tool_call_id"))
        for call in calls or []:
            called.add(call["id"])
            json.loads(call["function"]["arguments"])
    if not any(message["role"] == "assistant" for message in messages):
        return "example_missing_assistant_message"
    if called != answered:
        return f"tool calls {sorted(called)} answered by {sorted(answered)}"
    TypeAdapter(list[ChatCompletionMessageParam]).validate_python(messages)
    TypeAdapter(list[ChatCompletionToolParam]).validate_python(example["tools"])
    if not isinstance(example["parallel_tool_calls"], bool):
        return "parallel_tool_calls is not a boolean"
    return None


def sharegpt(example):
    turns = example.get("conversations")
    if not isinstance(turns, list) or not turns:
        return "no conversations"
    odd, even = ("human", "observation"), ("gpt", "function_call")
    for index, turn in enumerate(turns):
        if set(turn) != {"from", "value"} or not isinstance(turn["value"], str):
            return f"turn {index} is not {{from, value}}: {turn}"
        if turn["from"] not in (odd, even)[index % 2]:
            return f"turn {index} from {turn['from']} breaks the alternation"
        if turn["from"] == "function_call":
            calls = json.loads(turn["value"])
            for call in calls if isinstance(calls, list) else [calls]:
                if not isinstance(call.get("name"), str) or "arguments" not in call:
                    return f"turn {index}: a function_call without name and arguments"
    if len(turns) % 2:
        return "an odd number of turns"
    if not isinstance(example.get("system", ""), str):
        return "system is not a string"
    tools = json.loads(example["tools"])
    if not all(isinstance(t.get("name"), str) and "parameters" in t for t in tools):
        return "a tool without name and parameters"
    return None


def main():
    check = {"atif": atif, "openai-chat": openai_chat, "sharegpt": sharegpt}[sys.argv[1]]
    with open(sys.argv[2]) as lines:
        for number, line in enumerate(lines, 1):
            try:
                error = check(json.loads(line))
            except Exception as err:  # a validator's own exception is a failure too
                error = f"{type(err).__name__}: {err}"
            if error:
                print(f"line {number}: {error}")
                sys.exit(1)
    print("valid")


main()
