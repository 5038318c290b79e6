# mf: matrix factorisation of ratings, as one would use LIBMF.
#  1. generated MovieLens-shaped ratings (power-law users and items, 0.5-5 stars);
#  2. a seeded 90/10 split;
#  3. training with the defaults, early stopping on the held-out part;
#  4. RMSE/MAE of the model on it, and the top 5 unrated items of two users.
set -euo pipefail
cd "$WORK"
"$LACUNA" mf gen --users 20000 --items 4000 --ratings 1000000 --seed 1 ratings.txt 2>&1
"$LACUNA" mf split --fraction 0.1 --seed 1 ratings.txt train.txt test.txt 2>&1
echo
echo "-- train (k = 32, defaults; validation each epoch, best epoch kept)"
"$LACUNA" mf train -v test.txt train.txt model.bin
echo
echo "-- predict: RMSE on the held-out ratings (predictions in pred.txt, one a line)"
"$LACUNA" mf predict model.bin test.txt pred.txt
echo "   the noise in the generated ratings alone gives RMSE ~0.52"
echo
echo "-- recommend: 5 unrated items for users 1 and 2 (user, item, raw predicted score)"
"$LACUNA" mf recommend model.bin --users 1,2 -n 5
