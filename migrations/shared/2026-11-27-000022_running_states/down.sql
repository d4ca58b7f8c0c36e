DROP TABLE running_states;
