#!/bin/bash
printf 'mode=%s\nword=%s\n' "$APP_MODE" "$SECRET_WORD" > config.ini
