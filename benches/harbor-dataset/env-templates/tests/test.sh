#!/bin/bash
if grep -qx "mode=$APP_MODE" /etc/app/config.ini && grep -qx "word=$EXPECTED_WORD" /etc/app/config.ini \
   && [ "$APP_MODE" = production ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
