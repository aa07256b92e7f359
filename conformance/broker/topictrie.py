"""The topic exchange's bindings as a trie of words, as RabbitMQ keeps them
(``rabbit_exchange_type_topic`` / ``rabbit_db_topic_exchange``): a binding key is a path of words
from the root, and routing walks the trie once per message instead of matching every binding.

Words are split on ``.``; the empty key is no words (RabbitMQ's ``split_topic_key(<<>>) -> []``),
so ``*`` never matches it while ``#`` and the empty binding key do.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field


def split(key: str) -> list[str]:
    return [] if key == "" else key.split(".")


@dataclass
class Node:
    children: dict[str, Node] = field(default_factory=dict)
    bindings: set[Hashable] = field(default_factory=set)


class TopicTrie:
    def __init__(self) -> None:
        self.root = Node()

    def add(self, pattern: str, binding: Hashable) -> None:
        node = self.root
        for w in split(pattern):
            node = node.children.setdefault(w, Node())
        node.bindings.add(binding)

    def remove(self, pattern: str, binding: Hashable) -> None:
        path = [self.root]
        words = split(pattern)
        for w in words:
            nxt = path[-1].children.get(w)
            if nxt is None:
                return
            path.append(nxt)
        path[-1].bindings.discard(binding)
        # prune the nodes left with neither bindings nor children
        for depth in range(len(words), 0, -1):
            node = path[depth]
            if node.bindings or node.children:
                break
            del path[depth - 1].children[words[depth - 1]]

    def match(self, key: str) -> set[Hashable]:
        out: set[Hashable] = set()
        words = split(key)
        seen: set[tuple[int, int]] = set()
        stack = [(self.root, 0)]
        while stack:
            node, i = stack.pop()
            if (id(node), i) in seen:
                continue
            seen.add((id(node), i))
            hash_child = node.children.get("#")
            if hash_child is not None:
                # '#' takes zero or more of the words left
                stack.extend((hash_child, j) for j in range(i, len(words) + 1))
            if i == len(words):
                out |= node.bindings
                continue
            for w in (words[i], "*"):
                child = node.children.get(w)
                if child is not None:
                    stack.append((child, i + 1))
        return out
