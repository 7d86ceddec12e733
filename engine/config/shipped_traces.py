"""The real traces shipped with the lab, by short name, with where each came from.

A fresh clone replays real burstiness without files from elsewhere: `scenarios/traces/` holds
byte copies of three public traces, each folder beside its licence and a PROVENANCE.md (source
repository, commit, blob, checksum, citation). A scenario names one by its short name wherever it
can name a trace file (`trace.path: azure-code`, or `trace: azure-code` for short); the existing
readers (`engine.config.traces`) parse it like any file. A short name always means the shipped trace: a
local file of that name is named with a path (`./azure-code`).

Why `scenarios/traces/`: the `scenarios` package already ships as package data (an installed
engine carries the traces), and its folder is one the scenario loader lets a scenario read from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import scenarios

TRACE_DIR = Path(scenarios.__file__).resolve().parent / "traces"


@dataclass(frozen=True)
class ShippedTrace:
    """One shipped trace: its file, the facts a test checks it against, and its attribution."""

    name: str  # the short name a scenario uses
    file: str  # relative to TRACE_DIR
    format: str  # engine.config.traces format
    rows: int  # requests in the file
    bytes: int
    sha256: str
    blob: str  # the upstream git blob id (== `git hash-object` of the shipped file: a byte copy)
    title: str  # a proper name: not translated
    creator: str
    source: str  # repository @ commit : path
    url: str
    licence: str  # SPDX id
    licence_url: str
    licence_file: str  # relative to TRACE_DIR
    citation: str
    long_prompt: int  # the app's default "long prompt" threshold: about the longest 15-25 % of prompts

    @property
    def path(self) -> Path:
        return TRACE_DIR / self.file

    def attribution(self) -> str:
        """One line: what, by whom, under which licence, and the paper to cite (plain text)."""
        return f"{self.title} — {self.creator}, {self.licence}; {self.citation}"


AZURE_SOURCE = "Azure/AzurePublicDataset @ b469a113cedca53ddc3bdea71a143dc4b7d8700c"
AZURE_CITATION = ("Patel et al., \"Splitwise: Efficient generative LLM inference using phase splitting\", "
                  "ISCA 2024")
MOONCAKE_SOURCE = "kvcache-ai/Mooncake @ 3b5a594133958449a1feaf1c9e0fc1b553e34a28"
MOONCAKE_CITATION = ("Qin et al., \"Mooncake: Trading More Storage for Less Computation — A KVCache-centric "
                     "Architecture for Serving LLM Chatbot\", FAST 2025")

SHIPPED: dict[str, ShippedTrace] = {t.name: t for t in (
    ShippedTrace(
        "azure-code", "azure-llm-2023/AzureLLMInferenceTrace_code.csv", "azure", 8819, 320117,
        "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6", "62bd8109d0f2b1bc48206d397ecca48d8de03aab",
        "Azure LLM inference trace 2023 (code)", "Microsoft Azure",
        f"{AZURE_SOURCE}: data/AzureLLMInferenceTrace_code.csv",
        "https://github.com/Azure/AzurePublicDataset/blob/master/AzureLLMInferenceDataset2023.md",
        "CC-BY-4.0", "https://creativecommons.org/licenses/by/4.0/", "azure-llm-2023/LICENSE-CC-BY-4.0.txt",
        AZURE_CITATION, 4096),
    ShippedTrace(
        "azure-conv", "azure-llm-2023/AzureLLMInferenceTrace_conv.csv", "azure", 19366, 719188,
        "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8", "5b9219f2caf93bbbf95ec29894e206115658e235",
        "Azure LLM inference trace 2023 (conversation)", "Microsoft Azure",
        f"{AZURE_SOURCE}: data/AzureLLMInferenceTrace_conv.csv",
        "https://github.com/Azure/AzurePublicDataset/blob/master/AzureLLMInferenceDataset2023.md",
        "CC-BY-4.0", "https://creativecommons.org/licenses/by/4.0/", "azure-llm-2023/LICENSE-CC-BY-4.0.txt",
        AZURE_CITATION, 2048),
    ShippedTrace(
        "mooncake-conv", "mooncake-fast25/conversation_trace.jsonl", "mooncake", 12031, 3029533,
        "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df", "5a371794b81d7fc7487ec8a02a2c631bcc7fbdf8",
        "Mooncake FAST'25 conversation trace", "Moonshot AI / kvcache-ai",
        f"{MOONCAKE_SOURCE}: FAST25-release/traces/conversation_trace.jsonl",
        "https://github.com/kvcache-ai/Mooncake/tree/main/FAST25-release",
        "Apache-2.0", "https://www.apache.org/licenses/LICENSE-2.0", "mooncake-fast25/LICENSE-APACHE.txt",
        MOONCAKE_CITATION, 16384),
)}


def shipped_name(value: object) -> str | None:
    """The short name if `value` names a shipped trace (a `trace.path` value, or a `trace:` string
    or mapping), else None."""
    if isinstance(value, dict):
        value = value.get("path")
    return value if isinstance(value, str) and value in SHIPPED else None


def resolve(path: str | Path) -> str | Path:
    """A shipped trace's file for its short name; any other path unchanged."""
    name = shipped_name(str(path)) if isinstance(path, (str, Path)) else None
    return SHIPPED[name].path if name else path


def looks_like_a_name(path: str | Path) -> bool:
    """A value with no folder and no suffix (`azure-cod`): probably a mistyped short name."""
    p = Path(str(path))
    return len(p.parts) == 1 and not p.suffix and len(str(path)) <= 40
