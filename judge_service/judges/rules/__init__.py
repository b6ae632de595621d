"""The rules judge: exact arithmetic claims, repetition and the final answer; no API key."""
