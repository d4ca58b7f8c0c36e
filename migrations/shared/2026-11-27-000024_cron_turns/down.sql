DROP TABLE cron_turns;
