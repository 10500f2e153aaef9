"""The authority library: official statutes and regulations, loaded by release, and the resolver that checks a
statute citation or quote against them. It sits below ``chats``, which uses it through ``authorities.selectors``."""
