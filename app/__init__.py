"""Schedule Explorer's desktop app: thin Qt views over the headless engine (engine/)."""
