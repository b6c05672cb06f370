"""The small core every slice may import: names, ids, bounds, settings, errors, clients, logs."""
