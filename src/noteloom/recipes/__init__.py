"""Recipes: scheduled and on-demand LLM work, in agent mode or pipeline mode, each run
recorded in full (see ``noteloom.recipes.service``)."""
